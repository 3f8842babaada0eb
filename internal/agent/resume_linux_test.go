package agent

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// TestStreamQuiesce: Quiesce sends the quiesce request with a fresh
// nonce, returns that nonce once the agent answers, and from then on the
// session sends nothing: an exec fails at once with ErrQuiesced.
func TestStreamQuiesce(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	type result struct {
		nonce []byte
		err   error
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		n, err := s.Quiesce(ctx)
		done <- result{n, err}
	}()
	req := g.request()
	if req.Op != nsinit.OpQuiesce || len(req.Nonce) != 2*streammux.ResumeNonceLen {
		t.Fatalf("the host sent %+v, want a quiesce with a nonce of %d bytes", req, streammux.ResumeNonceLen)
	}
	g.event(`{"kind":"quiesced"}`)
	r := await(t, done, "Quiesce")
	if r.err != nil || hex.EncodeToString(r.nonce) != req.Nonce {
		t.Fatalf("Quiesce() = %x, %v; want the nonce it sent, %s", r.nonce, r.err, req.Nonce)
	}
	if o := await(t, execAsync(s, nil), "an exec after the quiesce"); !errors.Is(o.err, ErrQuiesced) {
		t.Errorf("an exec after the quiesce = %+v, %v; want ErrQuiesced", o.r, o.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if _, err := s.Quiesce(ctx); !errors.Is(err, ErrQuiesced) {
		t.Errorf("a second Quiesce() = %v, want ErrQuiesced", err)
	}
	if err := s.Err(); err != nil {
		t.Errorf("Err() = %v, want the session alive until it is closed", err)
	}
}

// TestStreamCheckpointEventsOutOfTurn: a quiesced event the host did not
// ask for, or a resumed event in a session that was not restored, is a
// breach.
func TestStreamCheckpointEventsOutOfTurn(t *testing.T) {
	for _, tt := range []struct{ line, want string }{
		{`{"kind":"quiesced"}`, "did not ask for"},
		{`{"kind":"resumed","live":[]}`, "outside the first event"},
		{`{"kind":"exited","id":1,"status":{"exit_code":0},"live":[]}`, "list of live processes"},
	} {
		s, g := attachStream(t, spec.DefaultLimits)
		g.event(tt.line)
		await(t, s.Done(), "the session's end")
		if err := s.Err(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("after %s: Err() = %v, want a breach saying %q", tt.line, err, tt.want)
		}
	}
}

// resumeNonce is the checkpoint nonce of the restored-attach tests.
var resumeNonce = []byte("0123456789abcdef")

// restoredGuest plays a restored agent: it reads the resume frame (which
// must carry resumeNonce), starts the new stream, takes the control
// channel and answers first.
func restoredGuest(t *testing.T, conn *os.File, first string, raw bool) (*streamGuest, error) {
	g := &streamGuest{t: t, conn: conn, killed: make(chan struct{})}
	resume := make([]byte, 9+streammux.ResumeNonceLen)
	if _, err := io.ReadFull(conn, resume); err != nil {
		return nil, err
	}
	if resume[0] != 7 || !bytes.Equal(resume[9:], resumeNonce) {
		return nil, errors.New("the host's first frame is not a resume with the checkpoint's nonce")
	}
	if raw {
		_, err := conn.Write([]byte(first + "\n"))
		return g, err
	}
	var err error
	if g.mux, err = streammux.New(conn, streammux.DefaultConfig(), false); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if g.ctl, err = g.mux.Accept(ctx); err != nil {
		return nil, err
	}
	_, err = g.ctl.Write([]byte(first + "\n"))
	return g, err
}

// restoredPrior is the checkpoint of the restored-attach tests:
// process 3 started with fd 1 its output, 5 not yet started.
func restoredPrior() Unfinished {
	return Unfinished{3: {Events: sawStarted, Streams: []string{"null", "out", "null"}}, 5: {}}
}

// attachRestored attaches a restored stream session (PriorIDs 5,
// restoredPrior) to a restored guest whose first event is first.
func attachRestored(t *testing.T, first string) (*Session, *streamGuest, error) {
	return attachRestoredFrom(t, first, false, 5, restoredPrior())
}

// attachRestoredFrom is attachRestored from the checkpoint lastID,
// prior, with a guest that writes first as a raw line on the connection,
// outside any stream, when raw is set.
func attachRestoredFrom(t *testing.T, first string, raw bool, lastID uint64, prior Unfinished) (*Session, *streamGuest, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	t.Cleanup(func() { box.Close() })
	guest := make(chan *streamGuest, 1)
	go func() {
		g, err := restoredGuest(t, box, first, raw)
		if err != nil {
			t.Logf("the restored guest: %v", err)
		}
		guest <- g
	}()
	killed := make(chan struct{})
	var once sync.Once
	f := Frame{
		Spec: spec.Spec{Limits: spec.DefaultLimits}, Control: host, Stream: true,
		Env:     func(extra []string) []string { return extra },
		Kill:    func() { once.Do(func() { close(killed); box.Close() }) },
		Exited:  killed,
		Cleanup: func() {},
		// a checkpoint's
		Restored: true, PriorIDs: lastID, Prior: prior, ResumeNonce: resumeNonce,
	}
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	s, err := Attach(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	t.Cleanup(func() { s.Close() })
	return s, await(t, guest, "the restored guest"), nil
}

// restored is a restored session whose agent lists process 3 with fd 1
// its output, and files to adopt it with: /dev/null and a pipe (w for
// fd 1, r to read what reaches it), closed when the test ends.
type restored struct {
	s    *Session
	g    *streamGuest
	null *os.File
	r, w *os.File
}

func attachListing(t *testing.T) restored {
	t.Helper()
	var x restored
	var err error
	if x.s, x.g, err = attachRestored(t, `{"kind":"resumed","live":[{"id":3,"streams":["null","out","null"]}]}`); err != nil {
		t.Fatalf("Attach() = %v", err)
	}
	if x.null, err = os.Open(os.DevNull); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.null.Close() })
	if x.r, x.w, err = os.Pipe(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.r.Close(); x.w.Close() })
	return x
}

// adopt adopts process 3 with x's files and returns the reattach the
// guest read, with its channels.
func (x restored) adopt(t *testing.T) (interp.Process, nsinit.Request, []*streammux.Channel) {
	t.Helper()
	type adoption struct {
		p   interp.Process
		err error
	}
	adopted := make(chan adoption, 1)
	go func() {
		p, err := x.s.Adopt(3, []*os.File{x.null, x.w, x.null})
		adopted <- adoption{p, err}
	}()
	req, chans := x.g.spawned()
	a := await(t, adopted, "Adopt")
	if a.err != nil {
		t.Fatalf("Adopt() = %v", a.err)
	}
	return a.p, req, chans
}

// TestStreamRestoredAttach: a restored stream session resumes the stream
// with the checkpoint's nonce and takes the processes the agent lists as
// its Live; an Adopt whose files do not fit is refused and leaves the
// listing.
func TestStreamRestoredAttach(t *testing.T) {
	x := attachListing(t)
	if got := x.s.Live(); len(got) != 1 || strings.Join(got[3], ",") != "null,out,null" {
		t.Fatalf("Live() = %v, want process 3 as null, out, null", got)
	}
	if got := x.s.LastID(); got != 5 {
		t.Errorf("LastID() = %d, want 5", got)
	}
	if _, err := x.s.Adopt(3, []*os.File{x.null, x.null, x.null}); err == nil || !strings.Contains(err.Error(), `fd 1 is "out"`) {
		t.Errorf("Adopt() with /dev/null for an output = %v, want a refusal naming fd 1", err)
	}
	// The refusal above left the listing for a right Adopt.
	if got := x.s.Live(); len(got) != 1 {
		t.Errorf("Live() after a refused Adopt = %v, want process 3 still listed", got)
	}
}

// TestStreamRestoredAdopt: Adopt sends the reattach with a channel for
// the output, whose bytes reach the file given, once; the process's end
// comes as a spawned one's.
func TestStreamRestoredAdopt(t *testing.T) {
	x := attachListing(t)
	p, req, chans := x.adopt(t)
	if _, err := x.s.Adopt(3, []*os.File{x.null, x.w, x.null}); err == nil || !strings.Contains(err.Error(), "adopted already") {
		t.Errorf("a second Adopt() of process 3 = %v, want a refusal", err)
	}
	x.w.Close()
	if req.Op != nsinit.OpReattach || req.ID != 3 || len(req.Streams) != 3 || req.Streams[1].Dir != nsinit.StreamOut || chans[1] == nil {
		t.Fatalf("the host sent %+v, want a reattach of process 3 with a channel for fd 1", req)
	}
	if _, err := chans[1].Write([]byte("x = 42\n")); err != nil {
		t.Fatal(err)
	}
	chans[1].Close()
	got, err := io.ReadAll(x.r)
	if err != nil || string(got) != "x = 42\n" {
		t.Errorf("the adopted output read %q, %v; want what the agent relayed", got, err)
	}
	x.g.event(`{"kind":"exited","id":3,"status":{"exit_code":5}}`)
	if st, err := p.Wait(); err != nil || st.Code != 5 {
		t.Errorf("Wait() = %+v, %v; want exit 5", st, err)
	}
	if st, err := p.Wait(); err != nil || st.Code != 5 {
		t.Errorf("a second Wait() = %+v, %v; want exit 5 again", st, err)
	}
}

// TestStreamRestoredAdoptKill: an adopted process's Kill sends the
// agent a SIGKILL of it, and the end the agent reports settles Wait.
func TestStreamRestoredAdoptKill(t *testing.T) {
	x := attachListing(t)
	p, _, _ := x.adopt(t)
	killed := make(chan error, 1)
	go func() { killed <- p.Kill() }()
	req := x.g.request()
	if err := await(t, killed, "Kill"); err != nil {
		t.Fatalf("Kill() = %v", err)
	}
	if req.Op != nsinit.OpKill || req.ID != 3 || req.Signal != int(unix.SIGKILL) {
		t.Errorf("the host sent %+v, want a SIGKILL of process 3", req)
	}
	x.g.event(`{"kind":"exited","id":3,"status":{"exit_code":137,"signal":9}}`)
	if st, err := p.Wait(); err != nil || st.Signal != 9 {
		t.Errorf("Wait() after Kill = %+v, %v; want killed by signal 9", st, err)
	}
	if err := x.s.Err(); err != nil {
		t.Errorf("Err() = %v, want the session alive", err)
	}
}

// TestStreamRestoredAttachRefuses: a restored agent's first event must
// be resumed, listing only processes the checkpoint held as running,
// each with no more than the fds its spawn was granted, on a line no
// longer than such a list; anything else fails the attach as a breach.
func TestStreamRestoredAttachRefuses(t *testing.T) {
	for _, tt := range []struct {
		first, want string
		raw         bool
	}{
		{`{"kind":"ready"}`, "out of turn", false},
		{`{"kind":"exited","id":3,"status":{"exit_code":0}}`, "not resumed", false},
		{`{"kind":"resumed","live":[{"id":4,"streams":[]}]}`, "process 4 as running", false},
		{`{"kind":"resumed","live":[{"id":9,"streams":[]}]}`, "process 9 as running", false},
		{`{"kind":"resumed","live":[{"id":3,"streams":["sideways"]}]}`, "direction", false},
		{`{"kind":"resumed","live":[{"id":3,"streams":[]},{"id":3,"streams":[]}]}`, "twice", false},
		{`{"kind":"resumed","live":[{"id":3,"streams":["null","out","null"]}]}`, "outside the stream", true},
		{`{"kind":"resumed","live":[{"id":3,"streams":["in","out","null"]}]}`, `fd 0 as "in", which was granted "null"`, false},
		{`{"kind":"resumed","live":[{"id":3,"streams":["null","in","null"]}]}`, `fd 1 as "in", which was granted "out"`, false},
		{`{"kind":"resumed","live":[{"id":3,"streams":["null","out"]}]}`, "spawned with 3", false},
		{`{"kind":"resumed","live":[{"id":5,"streams":["out"]}]}`, `fd 0 as "out", which was granted "null"`, false},
		{`{"kind":"resumed","live":[]}` + strings.Repeat(" ", maxEventLine+2*maxLiveEntry), "longer than", false},
	} {
		_, _, err := attachRestoredFrom(t, tt.first, tt.raw, 5, restoredPrior())
		if !errors.Is(err, nsinit.ErrProtocol) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Attach() after %s (raw %v) = %v, want a breach saying %q", tt.first, tt.raw, err, tt.want)
		}
	}
	f, _ := fakeFrame(t)
	f.Stream, f.Restored, f.ResumeNonce = true, true, []byte("short")
	if s, err := Attach(context.Background(), f); err == nil || !strings.Contains(err.Error(), "resume nonce") {
		if s != nil {
			s.Close()
		}
		t.Errorf("Attach() with a short nonce = %v, want a refusal", err)
	}
}

// quiesce quiesces s, its guest g answering.
func quiesce(t *testing.T, s *Session, g *streamGuest) {
	t.Helper()
	quiesced := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), testWait)
		defer cancel()
		_, err := s.Quiesce(ctx)
		quiesced <- err
	}()
	g.request()
	g.event(`{"kind":"quiesced"}`)
	if err := await(t, quiesced, "Quiesce"); err != nil {
		t.Fatalf("Quiesce() = %v", err)
	}
}

// TestStreamCheckpointFailedAfterCut: a quiesced session's Kill answers
// ErrQuiesced at once (no watch to blame the silent box), and EndCut, or
// a Quiesce whose ctx ends, ends the session naming the failed
// checkpoint, which every request then gets instead of ErrQuiesced.
func TestStreamCheckpointFailedAfterCut(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	quiesce(t, s, g)
	p := &Process{s: s, id: 9, started: make(chan struct{}), done: make(chan struct{})}
	killed := make(chan error, 1)
	go func() { killed <- p.Kill() }()
	if err := await(t, killed, "Kill"); !errors.Is(err, ErrQuiesced) {
		t.Errorf("Kill() after the quiesce = %v, want ErrQuiesced", err)
	}
	s.EndCut(errors.New("checkpoint: the host's disk is full"))
	await(t, s.Done(), "the session's end")
	if err := s.Err(); !errors.Is(err, ErrCheckpointFailed) || !strings.Contains(err.Error(), "disk is full") {
		t.Errorf("Err() after EndCut = %v, want ErrCheckpointFailed naming the cause", err)
	}
	if o := await(t, execAsync(s, nil), "an exec after EndCut"); !errors.Is(o.err, ErrSessionEnded) || errors.Is(o.err, ErrQuiesced) {
		t.Errorf("an exec after EndCut = %v, want the session's end, not ErrQuiesced", o.err)
	}

	s, _ = attachStream(t, spec.DefaultLimits)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Quiesce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Quiesce() with an ended ctx = %v, want context.Canceled", err)
	}
	if err := s.Err(); !errors.Is(err, ErrCheckpointFailed) {
		t.Errorf("Err() after a Quiesce whose ctx ended = %v, want ErrCheckpointFailed", err)
	}
}

// TestStreamSpawnRecordsGrants: a spawn over the stream records the
// direction of each fd it was granted, which Unfinished hands to the
// checkpoint (Frame.Prior) to bound a restored agent's list.
func TestStreamSpawnRecordsGrants(t *testing.T) {
	s, g := attachStream(t, spec.DefaultLimits)
	execAsync(s, nil)
	req, _ := g.spawned()
	want := make([]string, len(req.Streams))
	for i, st := range req.Streams {
		want[i] = st.Dir
	}
	if got := s.Unfinished()[req.ID]; got.Events != 0 || strings.Join(got.Streams, ",") != strings.Join(want, ",") {
		t.Errorf("Unfinished()[%d] = %+v, want no events and the spawn's directions %v", req.ID, got, want)
	}
}

// TestStreamRestoredListsWithin: a restored agent may list a process's
// fd as "null" where it was granted "out" (its stream ended), and may
// list more processes than an event line holds, as many as the
// checkpoint held running.
func TestStreamRestoredListsWithin(t *testing.T) {
	s, _, err := attachRestored(t, `{"kind":"resumed","live":[{"id":3,"streams":["null","null","null"]}]}`)
	if err != nil {
		t.Fatalf("Attach() listing fd 1 ended = %v", err)
	}
	if got := s.Live(); strings.Join(got[3], ",") != "null,null,null" {
		t.Errorf("Live() = %v, want process 3 with every fd null", got)
	}

	const n = 2000
	prior := Unfinished{}
	live := make([]string, 0, n)
	for id := uint64(1); id <= n; id++ {
		prior[id] = Pending{Events: sawStarted, Streams: []string{"in", "out", "out"}}
		live = append(live, fmt.Sprintf(`{"id":%d,"streams":["in","out","out"]}`, id))
	}
	line := `{"kind":"resumed","live":[` + strings.Join(live, ",") + `]}`
	if len(line) <= maxEventLine {
		t.Fatalf("the listing is %d bytes, want more than an event line's %d", len(line), maxEventLine)
	}
	s, _, err = attachRestoredFrom(t, line, false, n, prior)
	if err != nil {
		t.Fatalf("Attach() listing %d processes = %v", n, err)
	}
	if got := len(s.Live()); got != n {
		t.Errorf("Live() lists %d processes, want %d", got, n)
	}
}

// TestPendingJSON: a checkpoint's record keeps a process with no
// directions as its events alone (as before they were kept), one with
// directions as an object, reads both back, and refuses fields it does
// not know.
func TestPendingJSON(t *testing.T) {
	u := Unfinished{3: {Events: sawStarted}, 4: {Streams: []string{"in", "null"}}}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"3":1,"4":{"events":0,"streams":["in","null"]}}`; string(b) != want {
		t.Errorf("Marshal() = %s, want %s", b, want)
	}
	var back Unfinished
	if err := strictjson.Decode(b, &back); err != nil || back[3].Events != sawStarted || back[3].Streams != nil || strings.Join(back[4].Streams, ",") != "in,null" {
		t.Errorf("Decode(%s) = %+v, %v; want it back", b, back, err)
	}
	for _, in := range []string{`{"3":{"events":1,"streams":[],"extra":1}}`, `{"3":"1"}`, `{"3":{"events":1,"streams":["in"]} }x`} {
		if err := strictjson.Decode([]byte(in), &back); err == nil {
			t.Errorf("Decode(%s) = nil, want a refusal", in)
		}
	}
	if err := (Unfinished{3: {Streams: []string{"sideways"}}}).check(5); err == nil || !strings.Contains(err.Error(), "direction") {
		t.Errorf("check() of an unknown direction = %v, want a refusal", err)
	}
}

// TestStreamRestoredDropLive: DropLive kills a listed process through
// the agent and takes it off the listing, so no Adopt can take it and
// a second drop is refused; its end then comes as a dropped event.
func TestStreamRestoredDropLive(t *testing.T) {
	x := attachListing(t)
	s, g := x.s, x.g
	dropped := make(chan error, 1)
	go func() { dropped <- s.DropLive(3) }()
	req := g.request()
	if err := await(t, dropped, "DropLive"); err != nil {
		t.Fatalf("DropLive(3) = %v", err)
	}
	if req.Op != nsinit.OpKill || req.ID != 3 || req.Signal != int(unix.SIGKILL) {
		t.Errorf("the host sent %+v, want a SIGKILL of process 3", req)
	}
	if got := s.Live(); len(got) != 0 {
		t.Errorf("Live() after DropLive = %v, want nothing", got)
	}
	if err := s.DropLive(3); err == nil || !strings.Contains(err.Error(), "dropped already") {
		t.Errorf("a second DropLive(3) = %v, want a refusal", err)
	}
	if _, err := s.Adopt(3, nil); err == nil || !strings.Contains(err.Error(), "does not list it") {
		t.Errorf("Adopt(3) after DropLive = %v, want a refusal", err)
	}
	g.event(`{"kind":"exited","id":3,"status":{"exit_code":137,"signal":9}}`)
	if err := s.DropLive(5); err == nil || s.Err() != nil {
		t.Errorf("DropLive(5), not listed = %v, Err() = %v; want a refusal and the session alive", err, s.Err())
	}
}

// TestStreamCutExecEnds: an exec in flight when Quiesce cut the stream
// hears no end; once the checkpoint saved the box it fails with the
// session's end naming the checkpoint (ErrSaved), not a hang.
func TestStreamCutExecEnds(t *testing.T) {
	s, g := attachStreamFrame(t, spec.DefaultLimits, func(f *Frame) {
		f.Pause = func(context.Context) error { return nil }
		f.Resume = func(context.Context) error { return nil }
	})
	exec := execAsync(s, nil)
	req, _ := g.spawned()
	g.event(fmt.Sprintf(`{"kind":"started","id":%d,"pid":7}`, req.ID))
	quiesce(t, s, g)
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	if err := s.WhilePaused(ctx, func() (bool, error) { return true, nil }); err != nil {
		t.Fatalf("WhilePaused() = %v", err)
	}
	o := await(t, exec, "the exec in flight")
	if !errors.Is(o.err, ErrSaved) || !errors.Is(o.err, ErrSessionEnded) {
		t.Errorf("the exec in flight = %+v, %v; want the session's end, ErrSaved", o.r, o.err)
	}
}
