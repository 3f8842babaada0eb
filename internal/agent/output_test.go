package agent

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/drain"
)

// drainPipe captures what write writes into a fresh pipe, with ended
// closed, and fails the test if the drain does not end.
func drainPipe(t *testing.T, c *Capture, write func(w io.Writer)) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	wrote := make(chan struct{})
	go func() { defer close(wrote); write(w); w.Close() }()
	ended := make(chan struct{})
	p, err := drain.New(r, ended, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	drained := make(chan struct{})
	go func() { defer close(drained); c.Drain(p) }()
	select {
	case <-wrote:
	case <-time.After(time.Minute):
		t.Fatal("the writer is still blocked after a minute: output past the limit is not drained")
	}
	close(ended)
	select {
	case <-drained:
	case <-time.After(time.Minute):
		t.Fatal("the drain did not reach the end of the stream within a minute of the writer's end")
	}
}

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
		{"zero empty", 0, "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var live bytes.Buffer
			c := &Capture{limit: tt.limit, live: &live}
			drainPipe(t, c, func(w io.Writer) { _, _ = io.WriteString(w, tt.input) })
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

// TestCaptureDiscardsPastLimit floods a capture far past its limit: the
// writer must complete, the capture must keep and stream exactly the
// limit, and the host must copy only what it keeps, throwing the rest away
// uncopied (the mechanism that makes a flood cost the host nothing).
func TestCaptureDiscardsPastLimit(t *testing.T) {
	const limit, writes, size = 1000, 256, 64 << 10
	var live bytes.Buffer
	c := &Capture{limit: limit, live: &live}
	drainPipe(t, c, func(w io.Writer) {
		chunk := bytes.Repeat([]byte("y\n"), size/2)
		for range writes {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	if got := live.Len(); got != limit {
		t.Errorf("streamed %d bytes, want exactly the limit %d", got, limit)
	}
	if got := c.buf.Len(); got != limit || !c.truncated {
		t.Errorf("kept %d bytes, truncated %v; want %d, true", got, c.truncated, limit)
	}
	if c.copied != limit {
		t.Errorf("copied %d bytes into the host, want only the %d it keeps", c.copied, limit)
	}
	if want := int64(writes*size - limit); c.discarded != want {
		t.Errorf("discarded %d bytes, want %d", c.discarded, want)
	}
}
