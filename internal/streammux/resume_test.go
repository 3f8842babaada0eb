package streammux

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// testNonce is the resume nonce of these tests.
var testNonce = []byte("0123456789abcdef")

// cuttable is the old host's connection: once cut, its reads end (the
// old host is gone) and closing it leaves the connection to the new host.
type cuttable struct {
	net.Conn
	gone atomic.Bool
}

func (c *cuttable) Read(p []byte) (int, error) {
	if c.gone.Load() {
		return 0, io.EOF
	}
	n, err := c.Conn.Read(p)
	if c.gone.Load() {
		return 0, io.EOF
	}
	return n, err
}

func (c *cuttable) Close() error {
	if c.gone.Load() {
		return nil
	}
	return c.Conn.Close()
}

// cut ends the old host's reads without closing the connection.
func (c *cuttable) cut(t *testing.T) {
	t.Helper()
	c.gone.Store(true)
	if err := c.Conn.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
}

func readAll(t *testing.T, ch *Channel, n int) string {
	t.Helper()
	b := make([]byte, n)
	within(t, "a read", func() {
		if _, err := io.ReadFull(ch, b); err != nil {
			t.Errorf("reading channel %d: %v", ch.ID(), err)
		}
	})
	return string(b)
}

// TestQuiesceAndResume: both ends write their last frame, the old host
// goes, and a new host resumes the agent's armed stream on the same
// connection; the agent's old channels end with ErrResumed and new ones
// carry bytes both ways.
func TestQuiesceAndResume(t *testing.T) {
	t.Run("same descriptor", func(t *testing.T) { quiesceAndResume(t, false) })
	t.Run("fresh descriptor", func(t *testing.T) { quiesceAndResume(t, true) })
}

// quiesceAndResume is TestQuiesceAndResume, the agent resuming on a new
// descriptor of its connection (ResumeOn) when fresh.
func quiesceAndResume(t *testing.T, fresh bool) {
	cfg := smallConfig()
	a, b := loopbackPair(t)
	old := &cuttable{Conn: a}
	h1, err := New(old, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	ag, err := New(b, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	hctl, actl := open(t, h1), accept(t, ag)
	open(t, h1)
	aout := accept(t, ag)
	by := time.Now().Add(testWait)
	if err := hctl.WriteLast([]byte("quiesce"), by); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, actl, 7); got != "quiesce" {
		t.Fatalf("the agent read %q, want quiesce", got)
	}
	if err := ag.ArmResume(testNonce); err != nil {
		t.Fatal(err)
	}
	if err := actl.WriteLast([]byte("quiesced"), by); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, hctl, 8); got != "quiesced" {
		t.Fatalf("the host read %q, want quiesced", got)
	}
	// Nothing of the agent's follows its last frame.
	aout.SetWriteDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := aout.Write([]byte("late")); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("a write after the last frame = %v, want it held until its deadline", err)
	}
	old.cut(t)
	within(t, "the old host's end", func() { <-h1.Done() })
	if err := a.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := WriteResume(a, testNonce); err != nil {
		t.Fatal(err)
	}
	h2, err := New(a, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	within(t, "the old stream's end", func() { <-ag.Done() })
	if !errors.Is(ag.Err(), ErrResumed) {
		t.Fatalf("the agent's old stream ended with %v, want ErrResumed", ag.Err())
	}
	if _, err := aout.Read(make([]byte, 1)); !errors.Is(err, ErrResumed) {
		t.Errorf("a read of an old channel = %v, want ErrResumed", err)
	}
	var conn Conn
	if fresh {
		conn = dupConn(t, b)
	}
	ag2, err := ResumeOn(ag, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer ag2.Close()
	nctl, nactl := open(t, h2), accept(t, ag2)
	if nctl.ID() != 1 || nactl.ID() != 1 {
		t.Errorf("the new stream's first channel is %d/%d, want 1: ids start again", nctl.ID(), nactl.ID())
	}
	if _, err := nctl.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, nactl, 5); got != "hello" {
		t.Errorf("the resumed agent read %q, want hello", got)
	}
	if _, err := nactl.Write([]byte("again")); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, nctl, 5); got != "again" {
		t.Errorf("the new host read %q, want again", got)
	}
}

// TestResumeRefused: a resume with another nonce, or after a frame cut
// in two (a cut that was not quiesced), ends the armed stream as a
// breach, and one of another version as a mismatch; ResumeOn refuses
// a stream no resume ended.
func TestResumeRefused(t *testing.T) {
	cfg := smallConfig()
	resume := frame(frameResume, version, ResumeNonceLen, testNonce)
	for _, tc := range []struct {
		name, want string
		peer       []byte
		is         error
	}{
		{"another nonce", "another nonce than the checkpoint's", frame(frameResume, version, ResumeNonceLen, []byte("fedcba9876543210")), ErrProtocol},
		{"frame cut in two", "", cat(frame(frameOpen, 1, 0, nil), frame(frameData, 1, 12, []byte("abc")), resume), ErrProtocol},
		{"another version", "resume frame of version 2", frame(frameResume, version+1, ResumeNonceLen, testNonce), ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := feedArmed(t, cfg, testNonce, cat(hi(), tc.peer))
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %v saying %q", err, tc.is, tc.want)
			}
		})
	}
	host, _ := pair(t, cfg)
	if _, err := ResumeOn(host, nil); err == nil || !strings.Contains(err.Error(), "not ended by a resume frame") {
		t.Errorf("Resume of a live stream = %v, want a refusal", err)
	}
	if err := WriteResume(&bytes.Buffer{}, []byte("short")); err == nil {
		t.Error("WriteResume took a short nonce")
	}
}

// dupConn is a new descriptor of c's connection.
func dupConn(t *testing.T, c *net.TCPConn) net.Conn {
	t.Helper()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := net.FileConn(f)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}
