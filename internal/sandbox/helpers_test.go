package sandbox

import (
	"bytes"
	"testing"
)

// TestLimitedStreamsWhatItKeeps: a stream carries exactly the bytes the
// Result keeps, and Full says when that is all.
func TestLimitedStreamsWhatItKeeps(t *testing.T) {
	tests := []struct {
		name      string
		max       int64
		writes    []string
		want      string
		truncated bool
		full      bool
	}{
		{"under", 10, []string{"hel", "lo"}, "hello", false, false},
		{"exact", 5, []string{"hel", "lo"}, "hello", false, true},
		{"over in one write", 3, []string{"hello"}, "hel", true, true},
		{"over across writes", 4, []string{"hel", "lo", "world"}, "hell", true, true},
		{"no limit", 0, []string{"hello", "world"}, "helloworld", false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var live bytes.Buffer
			l := &limited{max: tt.max, live: &live}
			for _, w := range tt.writes {
				if n, err := l.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v; want %d, nil", w, n, err, len(w))
				}
			}
			if got := l.String(); got != tt.want {
				t.Errorf("kept %q, want %q", got, tt.want)
			}
			if got := live.String(); got != tt.want {
				t.Errorf("streamed %q, want %q (exactly what is kept)", got, tt.want)
			}
			if l.truncated != tt.truncated || l.Full() != tt.full {
				t.Errorf("truncated %v full %v, want %v %v", l.truncated, l.Full(), tt.truncated, tt.full)
			}
		})
	}
}
