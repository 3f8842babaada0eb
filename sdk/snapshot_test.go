package sdk

import (
	"context"
	"net/http"
	"testing"
)

// TestSnapshotAndFork: Snapshot, Fork and ForkWith send what the spec
// accepts and read the answers, a fork giving a handle per new session;
// Fork leaves "memory" out (the server's default), ForkWith sends it.
func TestSnapshotAndFork(t *testing.T) {
	forkIDs := []string{"ses_BBBBBBBBBBBBBBBBBBBBBBBB", "ses_CCCCCCCCCCCCCCCCCCCCCCCC"}
	var memory []*bool
	c, _ := newFake(t, map[string]http.HandlerFunc{
		"POST " + sessionPath + "/snapshot": func(w http.ResponseWriter, _ *http.Request) {
			writeJSON(w, http.StatusOK, map[string]any{"id": testID, "state": "snapshotted"})
		},
		"POST " + sessionPath + "/fork": func(w http.ResponseWriter, r *http.Request) {
			got := decodeBody[ForkRequest](t, r)
			if got.Count != 2 {
				t.Errorf("fork count: got %d, want 2", got.Count)
			}
			memory = append(memory, got.Memory)
			var list []map[string]any
			for _, id := range forkIDs {
				list = append(list, map[string]any{"id": id, "state": "ready"})
			}
			writeJSON(w, http.StatusCreated, map[string]any{"sessions": list})
		},
	})
	s := c.Session(testID)
	info, err := s.Snapshot(context.Background())
	if err != nil || info.State != SessionStateSnapshotted {
		t.Fatalf("Snapshot: %+v, %v; want snapshotted", info, err)
	}
	forks, err := s.Fork(context.Background(), 2)
	if err != nil || len(forks) != 2 {
		t.Fatalf("Fork: %v, %v; want 2 sessions", forks, err)
	}
	for i, f := range forks {
		if f.ID() != forkIDs[i] {
			t.Errorf("fork %d: got %s, want %s", i, f.ID(), forkIDs[i])
		}
	}
	off := false
	if _, err := s.ForkWith(context.Background(), ForkRequest{Count: 2, Memory: &off}); err != nil {
		t.Fatalf("ForkWith: %v", err)
	}
	if len(memory) != 2 || memory[0] != nil || memory[1] == nil || *memory[1] {
		t.Errorf("fork bodies' memory: %v, want unset then false", memory)
	}
}
