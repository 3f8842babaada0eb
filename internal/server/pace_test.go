package server

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"
)

// fakeReadDeadline records the read deadlines set on it.
type fakeReadDeadline struct{ set []time.Time }

func (f *fakeReadDeadline) SetReadDeadline(t time.Time) error {
	f.set = append(f.set, t)
	return nil
}

// stallingReader returns err once its text is read.
type stallingReader struct {
	io.Reader
	err error
}

func (s *stallingReader) Read(p []byte) (int, error) {
	n, err := s.Reader.Read(p)
	if err == io.EOF {
		err = s.err
	}
	return n, err
}

func (s *stallingReader) Close() error { return nil }

// TestPacedBodyDeadlines checks each read of a body moves the read
// deadline to the pause timeout from that read, never past the overall
// bound (pushed back by the server's own waits), and clears it once the
// body has ended or failed, however many reads follow.
func TestPacedBodyDeadlines(t *testing.T) {
	zero := time.Time{}
	for _, end := range []error{io.EOF, os.ErrDeadlineExceeded} {
		start := time.Unix(1000, 0)
		clock := start
		dl := &fakeReadDeadline{}
		p := &pacedBody{
			r:  &stallingReader{strings.NewReader("abcd"), end},
			dl: dl, timeout: 10 * time.Second, end: start.Add(25 * time.Second), now: func() time.Time { return clock },
		}
		buf := make([]byte, 1)
		var want []time.Time
		for _, step := range []struct {
			advance, extend time.Duration
			want            time.Time
		}{
			{0, 0, start.Add(10 * time.Second)},
			{9 * time.Second, 0, start.Add(19 * time.Second)},
			{9 * time.Second, 0, start.Add(25 * time.Second)}, // the overall bound
			{0, 5 * time.Second, start.Add(28 * time.Second)}, // pushed back by a wait
		} {
			clock = clock.Add(step.advance)
			p.extend(step.extend)
			if _, err := p.Read(buf); err != nil {
				t.Fatal(err)
			}
			want = append(want, step.want)
		}
		for range 3 {
			if _, err := p.Read(buf); !errors.Is(err, end) {
				t.Fatalf("read past the text: %v, want %v", err, end)
			}
		}
		want = append(want, start.Add(28*time.Second), zero) // the failed read's, then cleared
		if len(dl.set) != len(want) {
			t.Fatalf("end %v: deadlines %v, want %v", end, dl.set, want)
		}
		for i := range want {
			if !dl.set[i].Equal(want[i]) {
				t.Errorf("end %v: deadline %d is %v, want %v", end, i, dl.set[i], want[i])
			}
		}
		if p.stalled != errors.Is(end, os.ErrDeadlineExceeded) {
			t.Errorf("end %v: stalled %v", end, p.stalled)
		}
	}
}
