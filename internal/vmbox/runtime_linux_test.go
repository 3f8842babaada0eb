package vmbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/rootfs"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestRefuse: what the backend does not do yet is refused with one line
// naming it and where to go instead; a plain box, and one on a template,
// are accepted.
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
		{"template", func(s *spec.Spec) { s.Root = spec.Root{Template: "py", Dir: "/srv/t/py/rootfs"} }, ""},
		{"template unresolved", func(s *spec.Spec) { s.Root.Template = "py" }, `template "py"`},
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
// checks (Marshal refuses what the guest would), names the shares it
// gives QEMU (the root read-only, the scratch writable), and holds the
// box to --memory exactly, or to the VM's default without one.
func TestLayout(t *testing.T) {
	for _, tc := range []struct {
		l    spec.Limits
		want int64
	}{
		{spec.Limits{MemoryBytes: 256<<20 + 1}, 256<<20 + 1},
		{spec.Limits{MemoryBytes: spec.MinMemoryBytes}, spec.MinMemoryBytes},
		{spec.Limits{}, microvm.DefaultMemoryMiB << 20},
	} {
		boot, shares := layout(rootfs.Template{VarTmp: true}, "/run/x/root", "/run/x/scratch", tc.l)
		if _, err := boot.Marshal(); err != nil {
			t.Fatalf("layout's boot message for %+v: %v", tc.l, err)
		}
		if boot.MemoryBytes != tc.want {
			t.Errorf("boot memory limit for %+v = %d, want %d", tc.l, boot.MemoryBytes, tc.want)
		}
		if len(shares) != 2 || shares[0].Tag != boot.Root || !shares[0].ReadOnly || shares[1].Tag != boot.Scratch || shares[1].ReadOnly {
			t.Errorf("shares = %+v, want %s read-only and %s writable", shares, boot.Root, boot.Scratch)
		}
	}
}
