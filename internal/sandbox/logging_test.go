package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
)

// syncBuffer is a bytes.Buffer a logger may write from several goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// records are the JSON log lines written so far.
func (s *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(s.b.Bytes()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var r map[string]any
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, r)
	}
	return out
}

// TestCleanupFailureIsLogged: a sandbox whose Close fails, ended by a
// Delete, by Close of the Manager or as dead, is logged once at warn
// level with the session's id, the backend and the error, so the
// operator sees what doctor --leaks would later find, and why.
func TestCleanupFailureIsLogged(t *testing.T) {
	left := errors.New("removing cgroup x: device or resource busy")
	tests := []struct {
		name string
		end  func(m *Manager, id string)
	}{
		{"delete", func(m *Manager, id string) {
			if err := m.Delete(context.Background(), "alice", id); err != nil {
				t.Errorf("Delete() = %v, want nil (the session is gone)", err)
			}
		}},
		{"manager close", func(m *Manager, _ string) { m.Close() }},
		{"died", func(m *Manager, id string) {
			s, _ := m.lookupCtx(context.Background(), "alice", id)
			m.buryDied(s)
		}},
	}
	for _, tt := range tests {
		var buf syncBuffer
		log := slog.New(slog.NewJSONHandler(&buf, nil))
		m, _ := newTestManager(t, Config{Logger: log})
		info, err := m.Create(context.Background(), "alice", defaultOptions())
		if err != nil {
			t.Fatalf("%s: Create() = %v", tt.name, err)
		}
		s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
		s.box.(*fakeBox).closeErr = left
		tt.end(m, info.ID)
		warned := warnings(buf.records(t))
		if len(warned) != 1 {
			t.Fatalf("%s: logged %d warnings (%v), want 1", tt.name, len(warned), warned)
		}
		w := warned[0]
		if w["session"] != info.ID || w["backend"] != "fake" || w["err"] != left.Error() {
			t.Errorf("%s: logged %v, want session=%s backend=fake err=%q", tt.name, w, info.ID, left)
		}
	}
}

// TestSpawnKillFailureIsLogged: a spawned process that cannot be killed
// when its session ends is logged once at warn level through the
// Manager's Logger, with the session, the backend and the error; serve
// and mcp rely on it, as they set no other hook (a failure once went to
// a callback they no longer set, and nobody saw it).
func TestSpawnKillFailureIsLogged(t *testing.T) {
	m, s, box, _ := spawnSession(t)
	var buf syncBuffer
	m.cfg.Logger = slog.New(slog.NewJSONHandler(&buf, nil))
	stuck := errors.New("killing pid 7: operation not permitted")
	box.killErr = stuck
	p, err := m.Spawn(context.Background(), "alice", s.id, interp.Command{Argv: []string{"sleep", "9"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(p.(*Spawned).Process.(*fakeProc).end) })
	if err := m.Delete(context.Background(), "alice", s.id); err != nil {
		t.Fatal(err)
	}
	var warned []map[string]any
	for i := 0; i < 1000 && len(warned) == 0; i++ {
		time.Sleep(10 * time.Millisecond)
		warned = warnings(buf.records(t))
	}
	if len(warned) != 1 {
		t.Fatalf("logged %d warnings (%v), want 1", len(warned), warned)
	}
	w := warned[0]
	if w["session"] != s.id || w["backend"] != "fake" || w["err"] != stuck.Error() {
		t.Errorf("logged %v, want session=%s backend=fake err=%q", w, s.id, stuck)
	}
}

// warnings are the warn-level records of recs.
func warnings(recs []map[string]any) []map[string]any {
	var out []map[string]any
	for _, r := range recs {
		if r["level"] == "WARN" {
			out = append(out, r)
		}
	}
	return out
}
