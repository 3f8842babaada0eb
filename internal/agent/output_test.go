package agent

import (
	"bytes"
	"strings"
	"testing"
)

func TestCaptureLimit(t *testing.T) {
	tests := []struct {
		name      string
		limit     int64
		input     string
		want      string
		truncated bool
	}{
		{"under", 10, "hello", "hello", false},
		{"exact", 5, "hello", "hello", false},
		{"over", 3, "hello", "hel", true},
		{"zero", 0, "hello", "", true},
		{"empty", 4, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var live bytes.Buffer
			c := &Capture{limit: tt.limit, live: &live}
			c.Drain(strings.NewReader(tt.input))
			if got := c.buf.String(); got != tt.want {
				t.Errorf("captured %q, want %q", got, tt.want)
			}
			if got := live.String(); got != tt.want {
				t.Errorf("streamed %q, want %q", got, tt.want)
			}
			if c.truncated != tt.truncated {
				t.Errorf("truncated = %v, want %v", c.truncated, tt.truncated)
			}
		})
	}
}
