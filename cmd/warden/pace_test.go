//go:build !slim

package main

import (
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestPaces: --exec-pace and --start-rate 0 turn pacing off (a negative
// value in the Config), others pass as they are, and a negative flag is
// refused naming it.
func TestPaces(t *testing.T) {
	tests := []struct {
		flags           paces
		wantExec, wantS float64
		wantErr         string
	}{
		{paces{0.1, 5}, 0.1, 5, ""},
		{paces{0, 0}, -1, -1, ""},
		{paces{2, 0.5}, 2, 0.5, ""},
		{paces{-0.5, 5}, 0, 0, "--exec-pace -0.5 is negative"},
		{paces{0.1, -1}, 0, 0, "--start-rate -1 is negative"},
	}
	for _, tt := range tests {
		var c sandbox.Config
		err := tt.flags.apply(&c)
		switch {
		case tt.wantErr != "":
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v: got %v, want an error with %q", tt.flags, err, tt.wantErr)
			}
		case err != nil || c.ExecPace != tt.wantExec || c.StartRate != tt.wantS:
			t.Errorf("%+v: ExecPace %g, StartRate %g, %v; want %g, %g", tt.flags, c.ExecPace, c.StartRate, err, tt.wantExec, tt.wantS)
		}
	}
}
