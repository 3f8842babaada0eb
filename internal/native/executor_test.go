package native

import (
	"strings"
	"testing"
)

// TestExecutorChoose: every executor but fast is the Go init until
// warden-exec builds sandboxes, and fast says so in one line.
func TestExecutorChoose(t *testing.T) {
	tests := []struct {
		in      Executor
		want    Executor
		wantErr string
	}{
		{"", ExecutorGo, ""},
		{ExecutorAuto, ExecutorGo, ""},
		{ExecutorGo, ExecutorGo, ""},
		{ExecutorFast, "", "--executor fast: "},
		{"bogus", "", `executor "bogus"`},
	}
	for _, tt := range tests {
		got, err := tt.in.choose()
		if got != tt.want {
			t.Errorf("Executor(%q).choose() = %q, want %q", tt.in, got, tt.want)
		}
		if (tt.wantErr == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
			t.Errorf("Executor(%q).choose() error %v, want %q", tt.in, err, tt.wantErr)
		}
	}
}
