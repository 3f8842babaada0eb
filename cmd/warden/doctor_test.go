package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/doctor"
)

// TestPrintLeaks: leaks fail doctor --leaks with exit 1; the gVisor roots
// no store here holds are notes, printed (on stderr with --json, so
// stdout stays the list of leaks) and never failing.
func TestPrintLeaks(t *testing.T) {
	leak := doctor.Leak{Kind: "cgroup", What: "/sys/fs/cgroup/x/4194305-ab", Why: "gone"}
	root := doctor.Leak{Kind: "gvisor root", What: "/run/warden/gvisor/img-aa-1", Why: "a cache"}
	tests := []struct {
		name             string
		asJSON           bool
		found, notes     []doctor.Leak
		wantOut, wantErr string
		wantExit1        bool
	}{
		{"nothing", false, nil, nil, "ok  nothing left behind", "", false},
		{"a root only", false, nil, []doctor.Leak{root}, "note  gvisor root  /run/warden/gvisor/img-aa-1", "", false},
		{"a leak and a root", false, []doctor.Leak{leak}, []doctor.Leak{root}, "leak  cgroup  /sys/fs/cgroup/x/4194305-ab", "", true},
		{"json, a root only", true, nil, []doctor.Leak{root}, "[]\n", "note  gvisor root  /run/warden/gvisor/img-aa-1", false},
		{"json, a leak", true, []doctor.Leak{leak}, nil, `"what":"/sys/fs/cgroup/x/4194305-ab"`, "", true},
	}
	for _, tt := range tests {
		var out, errOut bytes.Buffer
		err := printLeaks(&out, &errOut, tt.asJSON, tt.found, tt.notes)
		var ee exitError
		if got := errors.As(err, &ee) && ee.code == 1; got != tt.wantExit1 || (err != nil && !got) {
			t.Errorf("%s: printLeaks = %v, want exit 1: %v", tt.name, err, tt.wantExit1)
		}
		if !strings.Contains(out.String(), tt.wantOut) {
			t.Errorf("%s: stdout = %q, want it to contain %q", tt.name, out.String(), tt.wantOut)
		}
		if !strings.Contains(errOut.String(), tt.wantErr) || (tt.wantErr == "" && errOut.Len() > 0) {
			t.Errorf("%s: stderr = %q, want %q", tt.name, errOut.String(), tt.wantErr)
		}
	}
}
