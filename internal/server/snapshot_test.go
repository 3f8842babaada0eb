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
func (f *fakeSessions) Snapshot(_ context.Context, owner, id string) (sandbox.Info, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, err := f.lookup(owner, id)
	if err != nil {
		return sandbox.Info{}, err
	}
	s.Info.State = sandbox.StateSnapshotted
	s.Info.Snapshot = &sandbox.SnapshotInfo{At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Bytes: 5, Files: 1}
	return s.Info, nil
}

// Fork makes count sessions like id.
func (f *fakeSessions) Fork(ctx context.Context, owner, id string, count int) ([]sandbox.Info, error) {
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
		{"fork with an unknown field", base + "/fork", keyA, `{"count":1,"memory":true}`, http.StatusBadRequest},
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
	if after.State != "snapshotted" || after.Snapshot == nil || after.Snapshot.Memory {
		t.Errorf("after snapshot: state %q, snapshot %+v; want snapshotted, files only", after.State, after.Snapshot)
	}
}
