package server

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Snapshot marks the fake session snapshotted, as the Manager does.
// It keeps memory when asked, as a MemoryBackend's would.
func (f *fakeSessions) Snapshot(_ context.Context, owner, id string, o sandbox.SnapshotOptions) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.lookup(owner, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	s.Info.State = sandbox.StateSnapshotted
	s.Info.Snapshot = &sandbox.SnapshotInfo{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Memory: o.Memory, Bytes: 5, Files: 1}
	return s.Info, nil
}

// Fork makes count sessions like id, noting o.
func (f *fakeSessions) Fork(ctx context.Context, owner, id string, count int, o sandbox.ForkOptions) ([]sandbox.Info, error) {
	f.mu.Lock()
	f.lastFork = o
	f.mu.Unlock()
	src, err := f.Get(context.Background(), owner, id)
	if err != nil {
		return nil, err
	}
	var out []sandbox.Info
	for range count {
		in, err := f.Create(ctx, owner, sandbox.SessionOptions{Limits: src.Limits, Network: src.Network})
		if err != nil {
			return nil, err
		}
		out = append(out, in)
	}
	return out, nil
}

func TestSnapshotAndForkEndpoints(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/sessions", keyA, `{"auto_snapshot":true}`)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if !h.fake.lastOptions.AutoSnapshot {
		t.Errorf("create with auto_snapshot: the Manager was not asked for it (%+v)", h.fake.lastOptions)
	}
	var ses sessionJSON
	if err := json.Unmarshal(r.body, &ses); err != nil {
		t.Fatal(err)
	}
	base := "/v1/sessions/" + ses.ID
	for _, tc := range []struct {
		name, path, key, body string
		want                  int
	}{
		{"snapshot", base + "/snapshot", keyA, "", http.StatusOK},
		{"snapshot of another key's session", base + "/snapshot", keyB, "", http.StatusNotFound},
		{"fork two", base + "/fork", keyA, `{"count":2}`, http.StatusCreated},
		{"fork none", base + "/fork", keyA, `{"count":0}`, http.StatusBadRequest},
		{"fork too many", base + "/fork", keyA, `{"count":17}`, http.StatusBadRequest},
		{"fork without a count", base + "/fork", keyA, `{}`, http.StatusBadRequest},
		{"fork with an unknown field", base + "/fork", keyA, `{"count":1,"files":true}`, http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.do("POST", tc.path, tc.key, tc.body)
			if got.status != tc.want {
				t.Fatalf("POST %s %s: got %d %s, want %d", tc.path, tc.body, got.status, got.body, tc.want)
			}
		})
	}
	r = h.do("GET", base, keyA, "")
	var after sessionJSON
	if err := json.Unmarshal(r.body, &after); err != nil {
		t.Fatal(err)
	}
	if after.State != "snapshotted" || after.Snapshot == nil || !after.Snapshot.Memory {
		t.Errorf("after snapshot: state %q, snapshot %+v; want snapshotted, memory asked for (the default)", after.State, after.Snapshot)
	}
}

// TestSnapshotMemoryField: a snapshot asks the Manager for memory unless
// its body says "memory": false; a bad body is a 400.
func TestSnapshotMemoryField(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/sessions", keyA, `{}`)
	var ses sessionJSON
	if err := json.Unmarshal(r.body, &ses); err != nil || ses.ID == "" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, body string
		want       int
		memory     bool
	}{
		{"no body", "", http.StatusOK, true},
		{"empty object", "{}", http.StatusOK, true},
		{"white space only", "  \n", http.StatusBadRequest, false},
		{"memory true", `{"memory":true}`, http.StatusOK, true},
		{"memory false", `{"memory":false}`, http.StatusOK, false},
		{"memory not a boolean", `{"memory":"no"}`, http.StatusBadRequest, false},
		{"unknown field", `{"files":true}`, http.StatusBadRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := h.do("POST", "/v1/sessions/"+ses.ID+"/snapshot", keyA, tc.body)
			if got.status != tc.want {
				t.Fatalf("snapshot %s: got %d %s, want %d", tc.body, got.status, got.body, tc.want)
			}
			if tc.want != http.StatusOK {
				return
			}
			var after sessionJSON
			if err := json.Unmarshal(got.body, &after); err != nil {
				t.Fatal(err)
			}
			if after.Snapshot == nil || after.Snapshot.Memory != tc.memory {
				t.Errorf("snapshot %s: %+v, want memory %v asked for", tc.body, after.Snapshot, tc.memory)
			}
		})
	}
}

// TestForkMemoryField: a fork asks the Manager for memory unless its body
// says "memory": false, as a snapshot does; a bad body is a 400.
func TestForkMemoryField(t *testing.T) {
	h := newHarness(t, nil)
	r := h.do("POST", "/v1/sessions", keyA, `{}`)
	var ses sessionJSON
	if err := json.Unmarshal(r.body, &ses); err != nil || ses.ID == "" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	for _, tc := range []struct {
		name, body string
		want       int
		memory     bool
	}{
		{"count only", `{"count":1}`, http.StatusCreated, true},
		{"memory true", `{"count":1,"memory":true}`, http.StatusCreated, true},
		{"memory false", `{"count":1,"memory":false}`, http.StatusCreated, false},
		{"memory not a boolean", `{"count":1,"memory":"no"}`, http.StatusBadRequest, false},
		{"memory null", `{"count":1,"memory":null}`, http.StatusBadRequest, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h.fake.mu.Lock()
			h.fake.lastFork = sandbox.ForkOptions{Memory: !tc.memory}
			h.fake.mu.Unlock()
			got := h.do("POST", "/v1/sessions/"+ses.ID+"/fork", keyA, tc.body)
			if got.status != tc.want {
				t.Fatalf("fork %s: got %d %s, want %d", tc.body, got.status, got.body, tc.want)
			}
			if tc.want != http.StatusCreated {
				return
			}
			h.fake.mu.Lock()
			asked := h.fake.lastFork.Memory
			h.fake.mu.Unlock()
			if asked != tc.memory {
				t.Errorf("fork %s: memory %v asked of the Manager, want %v", tc.body, asked, tc.memory)
			}
		})
	}
}
