package docker

import (
	"errors"
	"testing"
)

// TestWithReleasedKeepsBothErrors: a failed start and a failed release
// of the init's lock are each in the error start returns.
func TestWithReleasedKeepsBothErrors(t *testing.T) {
	errRun, errRelease := errors.New("run failed"), errors.New("unlock failed")
	tests := []struct {
		name        string
		run, unlock error
	}{
		{"both fine", nil, nil},
		{"run failed", errRun, nil},
		{"release failed", nil, errRelease},
		{"both failed", errRun, errRelease},
	}
	for _, tt := range tests {
		released := false
		err := withReleased(tt.run, func() error { released = true; return tt.unlock })
		if !released {
			t.Errorf("%s: the lease was not released", tt.name)
		}
		for _, want := range []error{tt.run, tt.unlock} {
			if want != nil && !errors.Is(err, want) {
				t.Errorf("%s: withReleased = %v, want it to hold %q", tt.name, err, want)
			}
		}
		if tt.run == nil && tt.unlock == nil && err != nil {
			t.Errorf("%s: withReleased = %v, want nil", tt.name, err)
		}
	}
}
