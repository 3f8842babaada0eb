package nsinit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/streammux"
)

// streamHost is the host's end of a stream to the agent's
// streamRequests, played by the test.
type streamHost struct {
	t   *testing.T
	mux *streammux.Mux
	ctl *streammux.Channel
	sr  *streamRequests
}

func newStreamHost(t *testing.T) *streamHost {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	t.Cleanup(func() { box.Close() })
	type served struct {
		sr  *streamRequests
		err error
	}
	done := make(chan served, 1)
	go func() {
		sr, err := serveStream(box, newEgressStream())
		done <- served{sr, err}
	}()
	mux, err := streammux.New(host, streammux.DefaultConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mux.Close() })
	ctl, err := mux.Open()
	if err != nil {
		t.Fatal(err)
	}
	s := <-done
	if s.err != nil {
		t.Fatalf("serveStream() = %v", s.err)
	}
	t.Cleanup(func() { s.sr.mux.Close() })
	return &streamHost{t: t, mux: mux, ctl: ctl, sr: s.sr}
}

// open opens n channels.
func (h *streamHost) open(n int) []*streammux.Channel {
	chans := make([]*streammux.Channel, n)
	for i := range chans {
		ch, err := h.mux.Open()
		if err != nil {
			h.t.Fatal(err)
		}
		chans[i] = ch
	}
	return chans
}

// send sends req on the control channel and has the agent read it.
func (h *streamHost) send(req Request) (Request, []int, error) {
	frame, err := EncodeRequest(req)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := h.ctl.Write(frame); err != nil {
		h.t.Fatal(err)
	}
	return h.sr.read()
}

// TestStreamSpawnPipes: a spawn's streams become pipes relayed to their
// channels both ways, and "null" the box's /dev/null.
func TestStreamSpawnPipes(t *testing.T) {
	h := newStreamHost(t)
	chans := h.open(2)
	req, fds, err := h.send(Request{Op: OpSpawn, ID: 1, Argv: []string{"x"}, Streams: []Stream{
		{Ch: chans[0].ID(), Dir: StreamIn}, {Ch: chans[1].ID(), Dir: StreamOut}, {Dir: StreamNull},
	}})
	if err != nil || req.Files != 3 || len(fds) != 3 || len(req.Streams) != 0 {
		t.Fatalf("read() = files %d, fds %v, streams %v, %v; want 3 fds and the streams consumed", req.Files, fds, req.Streams, err)
	}
	stdin, stdout, null := os.NewFile(uintptr(fds[0]), "0"), os.NewFile(uintptr(fds[1]), "1"), os.NewFile(uintptr(fds[2]), "2")
	defer stdin.Close()
	defer null.Close()
	if _, err := chans[0].Write([]byte("in")); err != nil {
		t.Fatal(err)
	}
	if err := chans[0].CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(stdin); err != nil || string(got) != "in" {
		t.Errorf("the process's stdin = %q, %v; want \"in\"", got, err)
	}
	stdout.Write([]byte("out"))
	stdout.Close()
	if got, err := io.ReadAll(chans[1]); err != nil || string(got) != "out" {
		t.Errorf("the host's stdout channel = %q, %v; want \"out\"", got, err)
	}
	if got, err := io.ReadAll(null); err != nil || len(got) != 0 {
		t.Errorf("the null stream = %q, %v; want end of file at once", got, err)
	}
	if link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", fds[2])); err != nil || link != "/dev/null" {
		t.Errorf("the null stream is %q, %v; want /dev/null", link, err)
	}
	if _, err := null.Write([]byte("x")); err != nil {
		t.Errorf("writing the null stream = %v, want it to take the write as /dev/null does", err)
	}
}

// TestStreamSpawnRefused: streams that do not add up refuse the spawn
// with a start error naming why, and the agent reads on.
func TestStreamSpawnRefused(t *testing.T) {
	h := newStreamHost(t)
	skipped := h.open(2)
	// The second is claimed and the first, unclaimed, dropped with it.
	if _, fds, err := h.send(Request{Op: OpSpawn, ID: 1, Streams: []Stream{{Ch: skipped[1].ID(), Dir: StreamOut}}}); err != nil {
		t.Fatalf("claiming channel %d: %v", skipped[1].ID(), err)
	} else {
		closeAll(fds)
	}
	again := h.open(1)[0]
	tests := []struct {
		name string
		req  Request
		want string
	}{
		{"a channel passed over", Request{Streams: []Stream{{Ch: skipped[0].ID(), Dir: StreamIn}}}, "claimed already or was never opened"},
		{"a channel claimed twice", Request{Streams: []Stream{{Ch: again.ID(), Dir: StreamIn}, {Ch: again.ID(), Dir: StreamOut}}}, "claimed already"},
		{"an unknown direction", Request{Streams: []Stream{{Ch: 99, Dir: "both"}}}, `direction "both"`},
		{"descriptors named", Request{Files: 3}, "descriptors named over the stream"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.req.Op, tt.req.ID = OpSpawn, 2
			_, fds, err := h.send(tt.req)
			var refused *refusedSpawn
			if !errors.As(err, &refused) || !strings.Contains(err.Error(), tt.want) || fds != nil {
				t.Errorf("read() = fds %v, %v; want a refused spawn saying %q", fds, err, tt.want)
			}
		})
	}
	if req, _, err := h.send(Request{Op: OpKill, ID: 1, Signal: 9}); err != nil || req.Op != OpKill {
		t.Errorf("a kill after the refusals = %+v, %v; want it read", req, err)
	}
}

// TestStreamRefusedSpawnFreesItsChannels: a spawn refused at its first
// stream still accepts and closes the later channels it named, so none
// keeps the host's slot.
func TestStreamRefusedSpawnFreesItsChannels(t *testing.T) {
	h := newStreamHost(t)
	chans := h.open(2)
	_, _, err := h.send(Request{Op: OpSpawn, ID: 1, Streams: []Stream{{Ch: chans[0].ID(), Dir: "both"}, {Ch: chans[1].ID(), Dir: StreamOut}}})
	var refused *refusedSpawn
	if !errors.As(err, &refused) {
		t.Fatalf("read() = %v, want a refused spawn", err)
	}
	for _, ch := range chans {
		if err := ch.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// All but the control channel free again: the agent closed both.
	want := h.mux.MaxChannels() - 1
	if err := h.mux.WaitSlots(want, time.Now().Add(acceptWait)); err != nil {
		free, waiting := h.mux.Slots()
		t.Errorf("the host's slots after the refusal: %v (%d free, %d waiting for the agent); want %d free", err, free, waiting, want)
	}
}

// TestStreamEndedCutsRelays: once a process has ended, its relays give
// their channels back though another process still holds its pipes
// (as /proc/<pid>/fd/1 allows): the input at once, the output after
// the linger.
func TestStreamEndedCutsRelays(t *testing.T) {
	h := newStreamHost(t)
	h.sr.linger = 0
	chans := h.open(2)
	_, fds, err := h.send(Request{Op: OpSpawn, ID: 1, Argv: []string{"x"}, Streams: []Stream{
		{Ch: chans[0].ID(), Dir: StreamIn}, {Ch: chans[1].ID(), Dir: StreamOut}, {Dir: StreamNull},
	}})
	if err != nil {
		t.Fatal(err)
	}
	// The test holds the process's ends open and never reads or writes
	// them, as a lingering box process would.
	defer closeAll(fds)
	h.sr.ended(1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if got, err := io.ReadAll(chans[1]); err != nil || len(got) != 0 {
			t.Errorf("the output channel = %q, %v; want its close", got, err)
		}
		// The input's relay is gone: writes fail once the stop arrives.
		for range 1000 {
			if _, err := chans[0].Write([]byte("x")); err != nil {
				if !errors.Is(err, streammux.ErrStopped) {
					t.Errorf("writing the cut input = %v, want ErrStopped", err)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Errorf("the cut input's channel still takes writes")
	}()
	select {
	case <-done:
	case <-time.After(acceptWait):
		t.Fatalf("the relays were not cut within %v", acceptWait)
	}
}

// TestStreamEgressDial: over the stream a bridge's connection is a
// channel the agent opens, which the host accepts, both ways.
func TestStreamEgressDial(t *testing.T) {
	h := newStreamHost(t)
	e := newEgressStream()
	e.serve(h.sr.mux)
	c, err := e.dial()
	if err != nil {
		t.Fatalf("dial() = %v", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), acceptWait)
	defer cancel()
	ch, err := h.mux.Accept(ctx)
	if err != nil {
		t.Fatalf("the host's Accept() = %v", err)
	}
	if ch.ID()%2 != 0 {
		t.Errorf("the bridge's channel has id %d, want an even one (the agent's)", ch.ID())
	}
	if _, err := c.Write([]byte("GET")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(ch); err != nil || string(got) != "GET" {
		t.Errorf("the host read %q, %v; want GET", got, err)
	}
}
