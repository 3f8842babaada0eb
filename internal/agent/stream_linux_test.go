package agent

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/streammux"
)

// streamGuest is a fake agent speaking the stream transport, driven by
// the test: the host's side is the real one.
type streamGuest struct {
	t      testing.TB
	conn   *os.File
	mux    *streammux.Mux
	ctl    *streammux.Channel
	killed chan struct{}
	once   sync.Once
}

// attachStream attaches a stream Session to a fake guest that has said
// it is ready; limits are the session's.
func attachStream(t testing.TB, l spec.Limits) (*Session, *streamGuest) {
	t.Helper()
	return attachStreamFrame(t, l, func(*Frame) {})
}

// attachStreamFrame is attachStream with the Frame changed by edit.
func attachStreamFrame(t testing.TB, l spec.Limits, edit func(*Frame)) (*Session, *streamGuest) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	g := &streamGuest{t: t, conn: box, killed: make(chan struct{})}
	ready := make(chan error, 1)
	go func() { ready <- g.start() }()
	dir := t.TempDir()
	f := Frame{
		Spec: spec.Spec{Limits: l}, Control: host, Stream: true,
		OpenWorkspace: func() (*os.File, error) { return os.Open(dir) },
		Env:           func(extra []string) []string { return extra },
		Kill:          func() { g.once.Do(func() { close(g.killed); box.Close() }) },
		Exited:        g.killed,
		Cleanup:       func() {},
	}
	edit(&f)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	s, err := Attach(ctx, f)
	if err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	if err := <-ready; err != nil {
		t.Fatalf("the fake guest: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s, g
}

// start is the guest's side of Attach: the stream, channel 1, ready.
func (g *streamGuest) start() error {
	var err error
	if g.mux, err = streammux.New(g.conn, streammux.DefaultConfig(), false); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if g.ctl, err = g.mux.Accept(ctx); err != nil {
		return err
	}
	_, err = g.ctl.Write([]byte(`{"kind":"ready"}` + "\n"))
	return err
}

func (g *streamGuest) event(line string) {
	if _, err := g.ctl.Write([]byte(line + "\n")); err != nil {
		g.t.Errorf("writing %q: %v", line, err)
	}
}

// request reads the host's next request.
func (g *streamGuest) request() nsinit.Request {
	var head [4]byte
	var req nsinit.Request
	if _, err := io.ReadFull(g.ctl, head[:]); err != nil {
		g.t.Errorf("reading a request: %v", err)
		return req
	}
	body := make([]byte, binary.BigEndian.Uint32(head[:]))
	if _, err := io.ReadFull(g.ctl, body); err != nil {
		g.t.Errorf("reading a request: %v", err)
		return req
	}
	if err := json.Unmarshal(body, &req); err != nil {
		g.t.Errorf("decoding request %q: %v", body, err)
	}
	return req
}

// spawned reads a spawn and accepts its channels: stdin (nil for
// /dev/null), stdout, stderr.
func (g *streamGuest) spawned() (nsinit.Request, []*streammux.Channel) {
	req := g.request()
	chans := make([]*streammux.Channel, len(req.Streams))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	for i, st := range req.Streams {
		if st.Dir == nsinit.StreamNull {
			continue
		}
		ch, err := g.mux.Accept(ctx)
		if err != nil || ch.ID() != st.Ch {
			g.t.Errorf("accepting stream %d (%+v): channel %v, %v", i, st, ch, err)
			return req, chans
		}
		chans[i] = ch
	}
	return req, chans
}

// execAsync runs an exec of the session in the background, for at most
// testWait.
func execAsync(s *Session, stdin io.Reader) <-chan execOutcome {
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	return execIn(ctx, cancel, s, stdin)
}

// execIn runs an exec of the session in the background under ctx, and
// calls cancel once it returned.
func execIn(ctx context.Context, cancel context.CancelFunc, s *Session, stdin io.Reader) <-chan execOutcome {
	out := make(chan execOutcome, 1)
	go func() {
		defer cancel()
		r, err := s.Exec(ctx, ExecSpec{Command: []string{"x"}}, IO{Stdin: stdin})
		out <- execOutcome{r, err}
	}()
	return out
}

type execOutcome struct {
	r   spec.Result
	err error
}

func await[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(testWait):
		t.Fatalf("%s: still waiting after %s", what, testWait)
	}
	var zero T
	return zero
}

// TestStreamExec: an exec over the stream carries stdin in and both
// outputs out, each on its own channel, and /dev/null needs none.
func TestStreamExec(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	res := execAsync(s, strings.NewReader("hello"))
	req, chans := g.spawned()
	want := []string{nsinit.StreamIn, nsinit.StreamOut, nsinit.StreamOut}
	for i, st := range req.Streams {
		if st.Dir != want[i] {
			t.Fatalf("stream %d is %q, want %q", i, st.Dir, want[i])
		}
	}
	g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, req.ID))
	in, err := io.ReadAll(chans[0])
	if err != nil {
		t.Fatalf("reading stdin: %v", err)
	}
	mustWrite(t, chans[1], append(in, '!'))
	chans[1].Close()
	mustWrite(t, chans[2], []byte("err"))
	chans[2].Close()
	chans[0].Close()
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":3}}`, req.ID))
	o := await(t, res, "the exec")
	if o.err != nil || o.r.ExitCode != 3 || o.r.Stdout != "hello!" || o.r.Stderr != "err" {
		t.Errorf("Exec() = exit %d, %q, %q, %v; want 3, \"hello!\", \"err\", nil", o.r.ExitCode, o.r.Stdout, o.r.Stderr, o.err)
	}

	res = execAsync(s, nil)
	req, _ = g.spawned()
	if req.Streams[0].Dir != nsinit.StreamNull || req.Streams[0].Ch != 0 {
		t.Errorf("stdin with none given = %+v, want %q and no channel", req.Streams[0], nsinit.StreamNull)
	}
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":127,"start_failed":true,"error":"nope"}}`, req.ID))
	if o := await(t, res, "the exec"); o.r.ExitCode != 127 {
		t.Errorf("start failure = exit %d, %v; want 127", o.r.ExitCode, o.err)
	}
}

// TestStreamHostileGuest: whatever the guest does on the stream ends its
// session with a cause, or is bounded: nothing hangs the host.
func TestStreamHostileGuest(t *testing.T) {
	tests := []struct {
		name string
		act  func(g *streamGuest)
		want string
	}{
		{"opens a channel", func(g *streamGuest) {
			if _, err := g.mux.Open(); err != nil {
				g.t.Errorf("Open() = %v", err)
			}
		}, "opened stream channel 2"},
		{"bad event line", func(g *streamGuest) { g.event(`{"kind":"ready"}`) }, "out of turn"},
		{"event line too long", func(g *streamGuest) {
			// the host ends the stream as it reads, so this write may fail
			_, _ = g.ctl.Write([]byte(strings.Repeat("x", maxEventLine+1)))
		}, "longer than"},
		{"hangs up", func(g *streamGuest) {
			g.mux.Close()
			g.conn.Close()
		}, "hung up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, g := attachStream(t, spec.DefaultLimits)
			tt.act(g)
			await(t, s.Done(), "the session's end")
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Err() = %v, want it to say %q", err, tt.want)
			}
		})
	}
}

// TestStreamGarbage: bytes that are no frame end the session as a breach
// and kill the box.
func TestStreamGarbage(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	defer box.Close()
	killed := make(chan struct{})
	var once sync.Once
	f := Frame{
		Control: host, Stream: true,
		OpenWorkspace: func() (*os.File, error) { return os.Open(t.TempDir()) },
		Kill:          func() { once.Do(func() { close(killed) }) },
		Exited:        killed,
		Cleanup:       func() {},
	}
	mustWrite(t, box, []byte("\x07garbage that is no hello"))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	_, err = Attach(ctx, f)
	if err == nil || !strings.Contains(err.Error(), "broke the host protocol") && !errors.Is(err, nsinit.ErrProtocol) {
		t.Errorf("Attach() = %v, want a broken protocol", err)
	}
	select {
	case <-killed:
	default:
		t.Error("the box was not killed")
	}
}

// TestStreamRefusalBeforeStream: an init that refuses its Config writes
// a JSON line before any stream; the host reports it as such.
func TestStreamRefusalBeforeStream(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	killed := make(chan struct{})
	var once sync.Once
	f := Frame{
		Control: host, Stream: true,
		OpenWorkspace: func() (*os.File, error) { return os.Open(t.TempDir()) },
		Kill:          func() { once.Do(func() { close(killed); box.Close() }) },
		Exited:        killed,
		Cleanup:       func() {},
	}
	mustWrite(t, box, []byte(`{"kind":"failed","status":{"error":"no such root"}}`+"\n"))
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := Attach(ctx, f); err == nil || !strings.Contains(err.Error(), "no such root") {
		t.Errorf("Attach() = %v, want the box's refusal", err)
	}
}

// TestStreamGuestStalls: a guest that never reads stdin and never closes
// stdout costs the exec nothing past its end: the exec returns once the
// process is reported ended (stdout within drainGrace), and the stdin
// relay is cut.
func TestStreamGuestStalls(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	res := execAsync(s, strings.NewReader(strings.Repeat("x", 4<<20)))
	req, chans := g.spawned()
	mustWrite(t, chans[1], []byte("partial"))
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, req.ID))
	o := await(t, res, "the exec")
	if o.err != nil || o.r.Stdout != "partial" {
		t.Errorf("Exec() = %q, %v; want \"partial\", nil", o.r.Stdout, o.err)
	}
	// The stdin relay was cut: the channel ends (the host's close) after
	// what the window held, not after the 4 MiB the relay would have
	// gone on sending as the guest read.
	type read struct {
		n   int
		err error
	}
	got := make(chan read, 1)
	go func() {
		b, err := io.ReadAll(chans[0])
		got <- read{len(b), err}
	}()
	if r := await(t, got, "the stdin channel's end"); r.err != nil || r.n >= 4<<20 {
		t.Errorf("the guest read %d bytes of stdin, %v; want at most the window and the host's close", r.n, r.err)
	}
	select {
	case <-s.Done():
		t.Errorf("the session ended: %v", s.Err())
	default:
	}
}

// TestStreamFloodOneByteFrames: a guest writing stdout one byte a frame
// is held to the output limit and its window; the host's heap stays
// bounded (nothing grows with what the guest sends) and the exec ends.
//
// The flood lasts as long as the host's reader paces it (at least
// flood*FrameCost/ReadRate, longer on a busy host), so neither the
// exec's context nor the session's timeout spans it. Progress is
// bounded instead: each floodStep frames must go out within testWait,
// and the whole flood ends before the test binary's own deadline, so a
// slow reader fails here, not as a timeout panic of the package.
func TestStreamFloodOneByteFrames(t *testing.T) {
	l := spec.DefaultLimits
	l.OutputBytes = 1024
	l.Timeout = 0
	s, g := attachStream(t, l)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	res := execIn(ctx, cancel, s, nil)
	req, chans := g.spawned()
	g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, req.ID))
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	// Past the window (128 KiB) twice over, so credit had to come back.
	const flood, floodStep = 512 << 10, 4 << 10
	b := []byte{'a'}
	last, bounded := t.Deadline()
	last = last.Add(-testWait)
	for i := range flood {
		if i%floodStep == 0 {
			by := time.Now().Add(testWait)
			if bounded && by.After(last) {
				by = last
			}
			chans[1].SetWriteDeadline(by)
		}
		if _, err := chans[1].Write(b); err != nil {
			t.Fatalf("writing byte %d of %d (each %d within %v, all before the test's deadline less %v): %v", i, flood, floodStep, testWait, testWait, err)
		}
	}
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	chans[1].Close()
	chans[2].Close()
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, req.ID))
	o := await(t, res, "the exec")
	if o.err != nil || len(o.r.Stdout) != 1024 || !o.r.StdoutTruncated {
		t.Errorf("Exec() = %d bytes, truncated %v, %v; want 1024, true, nil", len(o.r.Stdout), o.r.StdoutTruncated, o.err)
	}
	// Both ends live in this process: the bound is the two windows and
	// relays, far below what was sent (and what per-frame allocation
	// would keep).
	if grew := int64(after.HeapInuse) - int64(before.HeapInuse); grew > 8<<20 {
		t.Errorf("the heap grew %d bytes during a %d-byte flood, want it bounded by the stream's windows", grew, flood)
	}
}

// mustWrite writes b to w or fails the test.
func mustWrite(t testing.TB, w io.Writer, b []byte) {
	t.Helper()
	if _, err := w.Write(b); err != nil {
		t.Fatalf("writing %q: %v", b, err)
	}
}

// TestStreamEgressRelay: a channel the box's bridge opens is connected
// to the proxy's socket and relayed both ways, half-closes included.
func TestStreamEgressRelay(t *testing.T) {
	sock := t.TempDir() + "/proxy.sock"
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		got, _ := io.ReadAll(c) // the test checks what comes back
		_, _ = c.Write(append([]byte("proxy saw "), got...))
	}()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, err := streammux.New(os.NewFile(uintptr(fds[0]), "host"), streammux.DefaultConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	box, err := streammux.New(os.NewFile(uintptr(fds[1]), "box"), streammux.DefaultConfig(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	c, err := box.Open()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	ch, err := host.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	go relayEgress(ch, sock)
	mustWrite(t, c, []byte("CONNECT"))
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(c); err != nil || string(got) != "proxy saw CONNECT" {
		t.Errorf("the box read %q, %v; want \"proxy saw CONNECT\"", got, err)
	}
}

// TestStreamGuestHoldsChannels: a guest that never closes its outputs
// keeps their slots once the host has dropped them; when the stream has
// none left for the next exec, the host ends the session as a breach
// rather than fail every exec: whether the exec comes once the host has
// cut the outputs, or while they still drain (it waits, and the outputs
// are cut and owed long enough before its wait ends).
func TestStreamGuestHoldsChannels(t *testing.T) {
	for _, tt := range []struct {
		name      string
		afterCuts bool
	}{
		{"once the outputs are cut", true},
		{"while the outputs drain", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, g := attachStream(t, spec.DefaultLimits)
			const execs = 15
			fillEnded(t, s, g, execs)
			if tt.afterCuts {
				awaitOwed(t, s, 2*execs)
				// Closes owed only just now are no breach: the
				// request fails, and the session lives on.
				if err := s.waitSlots(2, time.Now().Add(100*time.Millisecond)); !errors.Is(err, ErrNoChannel) {
					t.Fatalf("waitSlots on closes owed since just now = %v, want ErrNoChannel", err)
				}
				if err := s.Err(); err != nil {
					t.Fatalf("the session ended on closes owed since just now: %v", err)
				}
			}
			if o := await(t, execAsync(s, nil), "the exec past the bound"); o.err == nil {
				t.Errorf("an exec on a full stream ran")
			}
			await(t, s.Done(), "the session's end")
			if err := s.Err(); err == nil || !strings.Contains(err.Error(), "stream channels the host has finished with") {
				t.Errorf("Err() = %v, want a breach for the channels it holds", err)
			}
		})
	}
}

// fillRunning starts execs execs of two channels each (stdin is
// /dev/null) that run until the guest says otherwise: their outcomes,
// spawn requests and the guest's ends of their channels.
func fillRunning(s *Session, g *streamGuest, execs int) ([]<-chan execOutcome, []nsinit.Request, [][]*streammux.Channel) {
	results := make([]<-chan execOutcome, execs)
	reqs := make([]nsinit.Request, execs)
	chans := make([][]*streammux.Channel, execs)
	for i := range results {
		results[i] = execAsync(s, nil)
		reqs[i], chans[i] = g.spawned()
		g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, reqs[i].ID))
	}
	return results, reqs, chans
}

// fillEnded runs execs execs of two channels each (stdin is /dev/null)
// that end at once, their outputs left open by the guest: with the
// control channel, fifteen fill the 32 slots.
func fillEnded(t *testing.T, s *Session, g *streamGuest, execs int) {
	t.Helper()
	results := make([]<-chan execOutcome, execs)
	for i := range results {
		results[i] = execAsync(s, nil)
		req, _ := g.spawned()
		g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, req.ID))
		g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, req.ID))
	}
	for i, res := range results {
		if o := await(t, res, "an exec"); o.err != nil {
			t.Fatalf("exec %d: %v", i, o.err)
		}
	}
}

// awaitOwed waits until the guest owes the close of want channels the
// host cut (outputLinger after each process's end).
func awaitOwed(t *testing.T, s *Session, want int) {
	t.Helper()
	for wait := time.Now().Add(testWait); ; time.Sleep(10 * time.Millisecond) {
		_, owed := s.mux.Slots()
		if owed == want {
			return
		}
		if time.Now().After(wait) {
			t.Fatalf("the box owes %d closes %s after the execs, want %d", owed, testWait, want)
		}
	}
}

// TestStreamGuestFloodsEndedOutput: a guest that writes on and on to an
// ended process's output, while the host still reads it, does not keep
// the slot: the host cuts it outputLinger after the end, and a guest
// that then keeps it is a breach like any other.
func TestStreamGuestFloodsEndedOutput(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	files := []*os.File{null}
	for range 2 {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		defer w.Close()
		go slowReader(r)
		files = append(files, w)
	}
	spawned := make(chan error, 1)
	go func() {
		_, err := s.Spawn(context.Background(), interp.Command{Argv: []string{"x"}, Files: files})
		spawned <- err
	}()
	req, chans := g.spawned()
	g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, req.ID))
	if err := await(t, spawned, "the spawn"); err != nil {
		t.Fatal(err)
	}
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, req.ID))
	for _, ch := range chans[1:] {
		go func() {
			chunk := make([]byte, 4096)
			for range 1 << 16 { // bounded: 256 MiB at most, and it stops at the host's stop
				if _, err := ch.Write(chunk); err != nil {
					return
				}
			}
		}()
	}
	// Fourteen running execs, the control channel and the two flooded
	// outputs leave one slot: the next exec needs two.
	fillRunning(s, g, 14) // they run until the session ends
	if o := await(t, execAsync(s, nil), "the exec past the bound"); o.err == nil {
		t.Errorf("an exec on a full stream ran")
	}
	await(t, s.Done(), "the session's end")
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "stream channels the host has finished with") {
		t.Errorf("Err() = %v, want a breach for the flooded channels it holds", err)
	}
}

// slowReader reads r as slowly as a host consumer that keeps a pipe
// full may, until r is closed: the relay of a flooded output then always
// has data to give.
func slowReader(r *os.File) {
	buf := make([]byte, 4096)
	for {
		if _, err := r.Read(buf); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestStreamOwedGraceFitsTheWait: the outputs of a process that ended as
// a request began its wait are cut, and owed for owedGrace, before the
// wait ends, with 2 s to spare for late timers, so a guest that keeps
// them is found out by that request; and an honest guest has at least
// 5 s to answer a close.
func TestStreamOwedGraceFitsTheWait(t *testing.T) {
	if spare := slotWait - outputLinger - owedGrace; spare < 2*time.Second {
		t.Errorf("slotWait %v - outputLinger %v - owedGrace %v = %v, want at least 2s", slotWait, outputLinger, owedGrace, spare)
	}
	if owedGrace < 5*time.Second {
		t.Errorf("owedGrace = %v, want at least 5s for an agent on a small CPU quota", owedGrace)
	}
}

// TestStreamFullStreamFailsOnlyTheExec: when the host's own live
// streams fill the stream, the next execs fail at once with
// ErrNoChannel, opening nothing (so the box is owed no close and is no
// breach), and the session lives on: once a process ends, an exec runs.
func TestStreamFullStreamFailsOnlyTheExec(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	// Fifteen running execs of two channels each (stdin is /dev/null)
	// and the control channel hold 31 of the 32 slots.
	const execs = 15
	results, reqs, chans := fillRunning(s, g, execs)
	for try := range 2 {
		o := await(t, execAsync(s, nil), "an exec on a full stream")
		if !errors.Is(o.err, ErrNoChannel) {
			t.Fatalf("exec %d on a full stream = %v, want ErrNoChannel", try, o.err)
		}
	}
	select {
	case <-s.Done():
		t.Fatalf("the session ended: %v", s.Err())
	default:
	}
	// The first process ends: its outputs close, the host's relays end.
	chans[0][1].Close()
	chans[0][2].Close()
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, reqs[0].ID))
	if o := await(t, results[0], "the first exec"); o.err != nil {
		t.Fatalf("the first exec: %v", o.err)
	}
	res := execAsync(s, nil)
	req, _ := g.spawned()
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":5}}`, req.ID))
	if o := await(t, res, "the exec after one ended"); o.err != nil || o.r.ExitCode != 5 {
		t.Errorf("the exec after one ended = exit %d, %v; want 5, nil", o.r.ExitCode, o.err)
	}
	if err := s.Err(); err != nil {
		t.Errorf("the session ended: %v", err)
	}
}

// TestStreamEndedProcessOutputsAreWaitedFor: the outputs of a process
// that has ended no longer count as the host's once it is reported
// ended, though their channels still drain; an exec that needs their
// slots waits for them rather than fail with ErrNoChannel (a code
// context deleted, then another run at once).
func TestStreamEndedProcessOutputsAreWaitedFor(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	const execs = 15
	results, reqs, chans := fillRunning(s, g, execs)
	// The first process ends; the box keeps its outputs open for now.
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":0}}`, reqs[0].ID))
	await(t, results[0], "the first exec")
	if got, want := s.held.count(), 2*(execs-1); got != want {
		t.Errorf("channels held after the first process ended = %d, want %d (its draining outputs do not count)", got, want)
	}
	res := execAsync(s, nil)
	chans[0][1].Close()
	chans[0][2].Close()
	req, _ := g.spawned()
	g.event(fmt.Sprintf(`{"kind":"exited","id":%d,"status":{"exit_code":3}}`, req.ID))
	if o := await(t, res, "the exec after one ended"); o.err != nil || o.r.ExitCode != 3 {
		t.Errorf("the exec after one ended = exit %d, %v; want 3, nil", o.r.ExitCode, o.err)
	}
}

// TestStreamGuestChannelNeedsEgressChannels: a box may open channels only
// when its bridge reaches the proxy by them (EgressChannels, with a
// proxy): native's bridge, which has its own way, opening one is a
// breach, as is a box that claims the bridge but has no proxy.
func TestStreamGuestChannelNeedsEgressChannels(t *testing.T) {
	for _, tt := range []struct {
		name string
		edit func(*Frame)
	}{
		{"a proxy reached otherwise", func(f *Frame) { f.Egress = &egress.Attachment{} }},
		{"egress channels without a proxy", func(f *Frame) { f.EgressChannels = true }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, g := attachStreamFrame(t, spec.DefaultLimits, tt.edit)
			if _, err := g.mux.Open(); err != nil {
				t.Fatalf("Open() = %v", err)
			}
			await(t, s.Done(), "the session's end")
			if err := s.Err(); !errors.Is(err, nsinit.ErrProtocol) || !strings.Contains(err.Error(), "opened stream channel 2") {
				t.Errorf("Err() = %v, want a breach for the channel it opened", err)
			}
		})
	}
}
