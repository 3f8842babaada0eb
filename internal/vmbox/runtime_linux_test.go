package vmbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestRefuse: what the backend does not do yet is refused with one line
// naming it and where to go instead; a plain box is accepted.
func TestRefuse(t *testing.T) {
	ok := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	for _, tc := range []struct {
		name string
		edit func(*spec.Spec)
		want string // "" for accepted
	}{
		{"plain", func(*spec.Spec) {}, ""},
		{"workspace", func(s *spec.Spec) { s.Workspace = "/srv/w" }, "--workspace"},
		{"scratch", func(s *spec.Spec) { s.Scratch = "/srv/s" }, "no host scratch"},
		{"template", func(s *spec.Spec) { s.Root.Template = "py" }, `template "py"`},
		{"proxy", func(s *spec.Spec) { s.Network.Mode = spec.NetProxy }, ""},
	} {
		s := ok
		tc.edit(&s)
		err := refuse(s)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: refuse = %v, want accepted", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%s: refuse = %v, want one line saying %q", tc.name, err, tc.want)
		case tc.want != "" && !errors.Is(err, spec.ErrInvalid):
			t.Errorf("%s: refuse = %v, want spec.ErrInvalid", tc.name, err)
		}
	}
}

// TestLayout: the boot message the backend sends passes the guest's own
// checks (Marshal refuses what the guest would), and names the shares it
// gives QEMU: the root read-only, the scratch writable.
func TestLayout(t *testing.T) {
	boot, shares := layout(rootfs.Template{VarTmp: true}, "/run/x/root", "/run/x/scratch")
	if _, err := boot.Marshal(); err != nil {
		t.Fatalf("layout's boot message: %v", err)
	}
	if len(shares) != 2 || shares[0].Tag != boot.Root || !shares[0].ReadOnly || shares[1].Tag != boot.Scratch || shares[1].ReadOnly {
		t.Errorf("shares = %+v, want %s read-only and %s writable", shares, boot.Root, boot.Scratch)
	}
}
