package native

import (
	"errors"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// TestExecutorPick: go is always the Go init; auto and fast are
// warden-exec where it can build the spec; auto is the Go init where it
// cannot, and fast says why in one line.
func TestExecutorPick(t *testing.T) {
	cannot := errors.New("a template's root needs the Go init")
	tests := []struct {
		in      Executor
		whyNot  error
		want    Executor
		wantErr string
	}{
		{"", nil, ExecutorFast, ""},
		{"", cannot, ExecutorGo, ""},
		{ExecutorAuto, nil, ExecutorFast, ""},
		{ExecutorAuto, cannot, ExecutorGo, ""},
		{ExecutorGo, nil, ExecutorGo, ""},
		{ExecutorGo, cannot, ExecutorGo, ""},
		{ExecutorFast, nil, ExecutorFast, ""},
		{ExecutorFast, cannot, "", "--executor fast: a template's root needs the Go init; use --executor auto"},
		{ExecutorFast, &nsinit.NotFastError{Feature: "--net proxy (the egress bridge)"}, "", "--executor fast: --net proxy (the egress bridge) needs the Go init; use --executor auto"},
		{"bogus", nil, "", `executor "bogus"`},
	}
	for _, tt := range tests {
		got, err := tt.in.pick(tt.whyNot)
		if got != tt.want {
			t.Errorf("Executor(%q).pick(%v) = %q, want %q", tt.in, tt.whyNot, got, tt.want)
		}
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Executor(%q).pick(%v) error %v, want %q", tt.in, tt.whyNot, err, tt.wantErr)
		}
		if tt.in == ExecutorFast && err != nil && !errors.Is(err, tt.whyNot) {
			t.Errorf("Executor(%q).pick(%v) error %v does not wrap its cause", tt.in, tt.whyNot, err)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("Executor(%q).pick(%v) error %q is not one line", tt.in, tt.whyNot, err)
		}
	}
}
