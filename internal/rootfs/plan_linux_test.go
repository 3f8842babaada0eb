package rootfs

import (
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestPlan: a host root's plan encodes for warden-exec, holds the /etc
// template from its first op to its bind, ends pivoted, and words each
// op's failure as the step that made the call did.
func TestPlan(t *testing.T) {
	o := Options{DiskBytes: 1 << 20, Inodes: 100, WorkspaceFD: -1, UID: 1000, GID: 1000,
		Etc: EtcTemplate{Dir: "/etc-template", Binds: []string{"ssl/certs"}}, View: View{CPUs: 1}}
	p, err := Plan("/tmp", o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plan.Encode(p); err != nil {
		t.Fatalf("Encode(Plan): %v", err)
	}
	first, last := p.Ops[0], p.Ops[len(p.Ops)-1]
	if first.Code != plan.OpenFD || first.Strs[0] != "/etc-template" || first.Context != `opening the /etc template "/etc-template"` {
		t.Errorf("first op = %+v, want the /etc template opened", first)
	}
	if last.Code != plan.MountSetattr || last.Strs[0] != "/" {
		t.Errorf("last op = %+v, want / restricted", last)
	}
	wantCtx := map[string]string{
		"/tmp/usr":           `binding /usr: mounting "/usr" on "/tmp/usr"`,
		"/tmp/etc/ssl/certs": `building /etc: mounting "/etc/ssl/certs" on "/tmp/etc/ssl/certs"`,
		"/tmp/dev/null":      `building /dev: /dev/null: mounting "/dev/null" on "/tmp/dev/null"`,
		"/tmp/.scratch":      `building writable dirs: mounting "tmpfs" on "/tmp/.scratch"`,
	}
	for _, op := range p.Ops {
		if op.Code != plan.Mount {
			continue
		}
		if want, ok := wantCtx[op.Strs[1]]; ok {
			if op.Context != want {
				t.Errorf("context of the mount on %s = %q, want %q", op.Strs[1], op.Context, want)
			}
			delete(wantCtx, op.Strs[1])
		}
	}
	for dst := range wantCtx {
		t.Errorf("no mount on %s in the plan", dst)
	}
	for _, op := range p.Ops {
		if op.Context == "" || strings.HasPrefix(op.Context, ":") {
			t.Errorf("op %s %v has context %q", op.Code, op.Strs, op.Context)
		}
	}
}

// TestPlanRefuses: a root Plan cannot make says why.
func TestPlanRefuses(t *testing.T) {
	if _, err := Plan("/tmp", Options{}); err == nil || !strings.Contains(err.Error(), "no /etc template") {
		t.Errorf("Plan without an /etc template: %v", err)
	}
	if _, err := Plan("/tmp", Options{Image: &ImageRoot{FD: 6}}); err == nil {
		t.Errorf("Plan of a template's root: no error")
	}
}
