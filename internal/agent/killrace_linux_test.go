package agent

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// readRequest reads one request frame the host sent the fake box.
func (fb *fakeBox) readRequest(t *testing.T) nsinit.Request {
	t.Helper()
	var head [4]byte
	if _, err := io.ReadFull(fb.box, head[:]); err != nil {
		t.Fatalf("reading a request's length: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(head[:]))
	if _, err := io.ReadFull(fb.box, body); err != nil {
		t.Fatalf("reading a request: %v", err)
	}
	var req nsinit.Request
	if err := json.Unmarshal(body, &req); err != nil {
		t.Fatalf("decoding request %q: %v", body, err)
	}
	return req
}

// TestKillBeforeStartIsSentAgain: a kill sent before the agent says the
// process runs may reach an agent that does not know its group yet, which
// drops it. The host sends it again once the process is reported running,
// so the process ends and the session lives, rather than being killed for
// a silence that was the host's own race.
func TestKillBeforeStartIsSentAgain(t *testing.T) {
	s, fb, _ := attachFake(t)
	p := &Process{s: s, id: 2, started: make(chan struct{}), done: make(chan struct{})}
	s.mu.Lock()
	s.nextID, s.procs[2], s.seen[2] = 2, p, 0
	s.mu.Unlock()
	kills := make(chan error, 1)
	go func() { kills <- p.Kill() }()
	if req := fb.readRequest(t); req.Op != nsinit.OpKill || req.ID != 2 {
		t.Fatalf("first request = %+v, want the kill of process 2", req)
	}
	if err := <-kills; err != nil {
		t.Fatalf("Kill() = %v", err)
	}
	fb.write(t, `{"kind":"started","id":2,"pid":8}`) // the agent dropped that kill
	got := make(chan nsinit.Request, 1)
	go func() { got <- fb.readRequest(t) }()
	select {
	case req := <-got:
		if req.Op != nsinit.OpKill || req.ID != 2 {
			t.Fatalf("request after the start = %+v, want the kill of process 2 again", req)
		}
	case <-p.done:
		t.Fatalf("process 2 ended without a second kill: session error %v", s.Err())
	case <-time.After(testWait):
		t.Fatal("no second kill once process 2 was reported running")
	}
	fb.write(t, `{"kind":"exited","id":2,"status":{"exit_code":137,"signal":9}}`)
	select {
	case <-p.done:
	case <-time.After(testWait):
		t.Fatal("process 2 did not end after its exit was reported")
	}
	if err := s.Err(); err != nil {
		t.Errorf("session ended with %v, want it alive", err)
	}
}
