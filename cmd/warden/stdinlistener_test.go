package main

import (
	"strings"
	"testing"
)

// TestCheckStdinListener: --stdin-listener works with the native backend
// only; what stdin must be, and --net none, native.Runtime.Run checks
// (TestListenerStdinRefused there).
func TestCheckStdinListener(t *testing.T) {
	tests := []struct {
		backend string
		set     bool
		want    string
	}{
		{"gvisor", false, ""},
		{"native", true, ""},
		{"gvisor", true, "works with --backend native only"},
		{"microvm", true, "works with --backend native only"},
	}
	for _, tt := range tests {
		o := &runOptions{backend: tt.backend, stdinListener: tt.set}
		err := o.checkStdinListener()
		if (tt.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s, set %v: checkStdinListener = %v; want an error containing %q (none if empty)", tt.backend, tt.set, err, tt.want)
		}
	}
}

// TestStdinListenerHidden: --stdin-listener is for launchers such as the
// test bed's kubelet, so warden run's help does not offer it.
func TestStdinListenerHidden(t *testing.T) {
	f := newRunCmd().Flags().Lookup("stdin-listener")
	if f == nil || !f.Hidden {
		t.Errorf("warden run's --stdin-listener: got %+v, want a hidden flag", f)
	}
}
