package nsinit

import (
	"bufio"
	"context"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/streammux"
)

// resumeWait bounds each wait of the takeover tests; no figure of speed.
const resumeWait = 20 * time.Second

var resumeNonce = []byte("0123456789abcdef")

// oldHost is the connection of the host that quiesced the stream: once
// cut its reads end and its Close leaves the connection to the new host.
type oldHost struct {
	net.Conn
	gone atomic.Bool
}

func (c *oldHost) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if c.gone.Load() {
		return 0, io.EOF
	}
	return n, err
}

func (c *oldHost) Close() error {
	if c.gone.Load() {
		return nil
	}
	return c.Conn.Close()
}

// read is one request the agent read, with a spawn's fds.
type read struct {
	req Request
	fds []int
}

// requests runs the agent's request reader, as readRequests does.
func requests(sr *streamRequests) <-chan read {
	reqs := make(chan read, 8)
	go func() {
		defer close(reqs)
		for {
			req, fds, err := sr.read()
			if err != nil {
				return
			}
			reqs <- read{req, fds}
		}
	}()
	return reqs
}

func nextRequest(t *testing.T, reqs <-chan read) read {
	t.Helper()
	select {
	case r, ok := <-reqs:
		if !ok {
			t.Fatal("the agent stopped reading requests")
		}
		return r
	case <-time.After(resumeWait):
		t.Fatal("the agent read no request")
	}
	return read{}
}

func writeRequest(t *testing.T, ch *streammux.Channel, req Request) {
	t.Helper()
	frame, err := EncodeRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ch.Write(frame); err != nil {
		t.Fatal(err)
	}
}

func readEvent(t *testing.T, r *bufio.Reader) Event {
	t.Helper()
	line, err := r.ReadBytes('\n')
	if err != nil {
		t.Fatalf("reading an event: %v", err)
	}
	e, err := ParseEvent(line, false)
	if err != nil {
		t.Fatalf("event %q: %v", line, err)
	}
	return e
}

// TestStreamTakeover: the host quiesces the stream with a process
// running, a new host resumes it on the same connection, the agent lists
// the process with its streams, and the reattach binds its pipes, never
// closed, to new channels: bytes the process wrote during the cut, stdin
// its relay held at the cut, and an event sent during it arrive. The
// egress bridge's connection made as soon as the resumed event arrives
// is a channel of the resumed stream.
func TestStreamTakeover(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	hostFile, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	hc, err := net.FileConn(hostFile)
	if err != nil {
		t.Fatal(err)
	}
	hostFile.Close()
	t.Cleanup(func() { hc.Close() })
	old := &oldHost{Conn: hc}
	bridge := newEgressStream()
	served := make(chan *streamRequests, 1)
	go func() {
		sr, err := serveStream(box, bridge)
		if err != nil {
			t.Error(err)
		}
		served <- sr
	}()
	h1, err := streammux.New(old, streammux.DefaultConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	ctl1, err := h1.Open()
	if err != nil {
		t.Fatal(err)
	}
	sr := <-served
	if sr == nil {
		t.FailNow()
	}
	t.Cleanup(func() { sr.mux.Close() })
	reqs := requests(sr)
	in1, _ := h1.Open()
	out1, _ := h1.Open()
	writeRequest(t, ctl1, Request{Op: OpSpawn, ID: 1, Argv: []string{"x"}, Streams: []Stream{{Ch: in1.ID(), Dir: StreamIn}, {Ch: out1.ID(), Dir: StreamOut}, {Dir: StreamNull}}})
	spawn := nextRequest(t, reqs)
	if spawn.req.Op != OpSpawn || len(spawn.fds) != 3 {
		t.Fatalf("the agent read %q with fds %v, want the spawn with 3", spawn.req.Op, spawn.fds)
	}
	// The test plays the process, holding its ends of the pipes.
	procIn, procOut := os.NewFile(uintptr(spawn.fds[0]), "stdin"), os.NewFile(uintptr(spawn.fds[1]), "stdout")
	defer procIn.Close()
	defer procOut.Close()
	unix.Close(spawn.fds[2])
	procOut.Write([]byte("before")) //nolint:errcheck // checked by what the host reads
	if got := readN(t, out1, 6); got != "before" {
		t.Fatalf("the host read %q, want before", got)
	}

	// Stdin past what its pipe holds: the relay holds the rest across
	// the cut.
	if _, err := in1.Write(append(make([]byte, pipeSize), "held"...)); err != nil {
		t.Fatal(err)
	}
	awaitPipeFull(t, procIn)

	quiesce, err := EncodeRequest(Request{Op: OpQuiesce, Nonce: hex.EncodeToString(resumeNonce)})
	if err != nil {
		t.Fatal(err)
	}
	if err := ctl1.WriteLast(quiesce, time.Now().Add(resumeWait)); err != nil {
		t.Fatal(err)
	}
	if e := readEvent(t, bufio.NewReader(ctl1)); e.Kind != EventQuiesced {
		t.Fatalf("the agent answered %q, want quiesced", e.Kind)
	}
	if r := nextRequest(t, reqs); r.req.Op != OpQuiesce {
		t.Fatalf("the agent read %q, want the quiesce", r.req.Op)
	}
	procOut.Write([]byte("during")) //nolint:errcheck // checked by what the new host reads
	late := make(chan error, 1)
	go func() {
		_, err := sr.events.Write([]byte(`{"kind":"exited","id":1,"status":{"exit_code":0}}` + "\n"))
		late <- err
	}()

	old.gone.Store(true)
	if err := hc.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	<-h1.Done()
	if err := hc.SetReadDeadline(time.Time{}); err != nil {
		t.Fatal(err)
	}
	if err := streammux.WriteResume(hc, resumeNonce); err != nil {
		t.Fatal(err)
	}
	h2, err := streammux.New(hc, streammux.DefaultConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer h2.Close()
	ctl2, err := h2.Open()
	if err != nil {
		t.Fatal(err)
	}
	events := bufio.NewReader(ctl2)
	e := readEvent(t, events)
	if e.Kind != EventResumed || len(e.Live) != 1 || e.Live[0].ID != 1 || len(e.Live[0].Streams) != 3 ||
		e.Live[0].Streams[0] != StreamIn || e.Live[0].Streams[1] != StreamOut || e.Live[0].Streams[2] != StreamNull {
		t.Fatalf("the first event after the resume = %+v, want resumed listing process 1 as in, out, null", e)
	}
	// As soon as the host hears of the resume, the bridge's connections
	// go on the resumed stream.
	checkBridgeResumed(t, bridge, h2)
	if e := readEvent(t, events); e.Kind != EventExited || e.ID != 1 {
		t.Errorf("the event sent during the cut came as %+v, want it after resumed", e)
	}
	if err := <-late; err != nil {
		t.Errorf("the event sent during the cut: %v", err)
	}
	in2, _ := h2.Open()
	out2, _ := h2.Open()
	writeRequest(t, ctl2, Request{Op: OpReattach, ID: 1, Streams: []Stream{{Ch: in2.ID(), Dir: StreamIn}, {Ch: out2.ID(), Dir: StreamOut}, {Dir: StreamNull}}})
	if r := nextRequest(t, reqs); r.req.Op != OpReattach {
		t.Fatalf("the agent read %q, want the reattach", r.req.Op)
	}
	if got := readN(t, out2, 6); got != "during" {
		t.Errorf("the new host read %q, want what the process wrote during the cut", got)
	}
	procOut.Write([]byte("after")) //nolint:errcheck // checked below
	if got := readN(t, out2, 5); got != "after" {
		t.Errorf("the new host read %q, want after", got)
	}
	if _, err := in2.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, pipeSize+len("held")+len("hello"))
	if _, err := io.ReadFull(procIn, got); err != nil || string(got[pipeSize:]) != "heldhello" {
		t.Errorf("the process's stdin ended %q, %v; want what the relay held across the cut, then hello through the new channel", got[pipeSize:], err)
	}
}

// checkBridgeResumed checks that bridge, the egress bridge of an agent
// whose stream was taken over, opens its next channel on the resumed
// stream, which h, the new host, accepts.
func checkBridgeResumed(t *testing.T, bridge *egressStream, h *streammux.Mux) {
	t.Helper()
	c, err := bridge.dial()
	if err != nil {
		t.Fatalf("the bridge's connection after the resume: %v; want a channel of the resumed stream", err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), resumeWait)
	defer cancel()
	got, err := h.Accept(ctx)
	if err != nil {
		t.Fatalf("the new host's accept of the bridge's channel: %v", err)
	}
	if want := c.(*streammux.Channel).ID(); got.ID() != want {
		t.Errorf("the new host accepted channel %d, want the bridge's %d", got.ID(), want)
	}
}

// pipeSize is what a pipe holds by default.
const pipeSize = 64 << 10

// awaitPipeFull waits until r, a pipe's read end, holds pipeSize bytes.
func awaitPipeFull(t *testing.T, r *os.File) {
	t.Helper()
	n := 0
	for range 4000 {
		var err error
		// TIOCINQ is FIONREAD: the bytes the pipe holds.
		if n, err = unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ); err != nil {
			t.Fatal(err)
		}
		if n >= pipeSize {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("the pipe holds %d bytes, want it full (%d)", n, pipeSize)
}

// TestStreamReattachRefused: a reattach naming a process not listed, or
// streams that do not match, is refused and its channels closed; the
// agent reads on.
func TestStreamReattachRefused(t *testing.T) {
	h := newStreamHost(t)
	chans := h.open(1)
	if _, _, err := h.send(Request{Op: OpReattach, ID: 7, Streams: []Stream{{Ch: chans[0].ID(), Dir: StreamOut}}}); err != nil {
		t.Fatalf("read() of a refused reattach = %v, want the agent to read on", err)
	}
	chans[0].SetReadDeadline(time.Now().Add(resumeWait))
	if _, err := io.ReadAll(chans[0]); err != nil {
		t.Errorf("the refused reattach's channel: %v, want it closed by the agent", err)
	}
	if _, _, err := h.send(Request{Op: OpKill, ID: 1}); err != nil {
		t.Errorf("the next request: %v", err)
	}
}

func readN(t *testing.T, ch *streammux.Channel, n int) string {
	t.Helper()
	ch.SetReadDeadline(time.Now().Add(resumeWait))
	b := make([]byte, n)
	if _, err := io.ReadFull(ch, b); err != nil && !errors.Is(err, io.EOF) {
		t.Fatalf("reading channel %d: %v", ch.ID(), err)
	}
	return string(b)
}

// TestStreamRebindKeepsParked: a reattach that does not fit the parked
// relays (count or direction) leaves them parked, so a right one can
// still take the process, and a second one is refused.
func TestStreamRebindKeepsParked(t *testing.T) {
	out := &streamRelay{parked: true}
	sr := &streamRequests{relays: map[uint64][]*streamRelay{3: {nil, out, nil}}}
	for _, streams := range [][]Stream{
		{{Dir: StreamNull}, {Dir: StreamOut}},
		{{Dir: StreamNull}, {Dir: StreamIn}, {Dir: StreamNull}},
		{{Dir: StreamNull}, {Dir: StreamNull}, {Dir: StreamNull}},
	} {
		if err := sr.rebind(Request{Op: OpReattach, ID: 3, Streams: streams}); err == nil {
			t.Errorf("rebind(%+v) = nil, want a refusal", streams)
		}
		if !out.parked {
			t.Fatalf("rebind(%+v) unparked the output relay, want it kept for a right reattach", streams)
		}
	}
	relays, wants, err := sr.parked(3)
	if err != nil || wants[1] != StreamOut {
		t.Fatalf("parked(3) = %v, %v; want fd 1 waiting for an output", wants, err)
	}
	if err := sr.unpark(relays, wants); err != nil || out.parked {
		t.Fatalf("unpark() = %v (parked %v), want the relay taken", err, out.parked)
	}
	if err := sr.unpark(relays, wants); err == nil {
		t.Error("a second unpark() = nil, want a refusal")
	}
}

// TestDetachAllWaitsUnlocked: detachAll waits for the relays outside
// relayMu, so a process that ends meanwhile (ended, which takes the
// lock) is not held up by a slow relay, and is not listed; the slow
// relay, done in time, is listed as waiting for its channel.
func TestDetachAllWaitsUnlocked(t *testing.T) {
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	slow := &streamRelay{f: pw, done: make(chan struct{})}
	sr := &streamRequests{relays: map[uint64][]*streamRelay{1: {nil, slow}, 2: {nil}}}
	go func() {
		for i := 0; i < 2000 && !slow.detaching.Load(); i++ {
			time.Sleep(5 * time.Millisecond)
		}
		// Without the lock free, this waits out detachWait.
		sr.ended(2)
		close(slow.done)
	}()
	live := sr.detachAll()
	if len(live) != 1 || live[0].ID != 1 || len(live[0].Streams) != 2 || live[0].Streams[1] != StreamOut {
		t.Errorf("detachAll() = %+v, want process 1 alone, its fd 1 waiting as out", live)
	}
	if !slow.parked {
		t.Error("the slow relay is not parked, want it kept for a reattach")
	}
}

// TestRelayStopTimesOut: a relay that does not return by the detach's
// deadline (its goroutine starved) is cut, its pipe's end and channel
// closed, and listed as ended ("null"), not parked; one whose stream had
// ended is listed "null" too.
func TestRelayStopTimesOut(t *testing.T) {
	h := newStreamHost(t)
	ch := h.open(1)[0]
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	stuck := &streamRelay{ch: ch, f: pw, done: make(chan struct{})}
	ended := &streamRelay{f: pw, done: make(chan struct{}), finished: true}
	close(ended.done)
	stuck.stop()
	if stuck.stopped(time.Now()) {
		t.Error("stopped() of a relay that never returned = true, want it cut")
	}
	if _, err := pw.Write([]byte("x")); !errors.Is(err, os.ErrClosed) {
		t.Errorf("writing the cut relay's pipe end: %v, want it closed", err)
	}
	if ended.stopped(time.Now().Add(resumeWait)) {
		t.Error("stopped() of a relay whose stream had ended = true, want false")
	}
	sr := &streamRequests{relays: map[uint64][]*streamRelay{4: {ended}}}
	if live := sr.park(map[uint64][]*streamRelay{4: {ended}}, map[*streamRelay]bool{}); len(live) != 1 || live[0].Streams[0] != StreamNull || ended.parked {
		t.Errorf("park() = %+v, want process 4's fd listed null and not parked", live)
	}
}
