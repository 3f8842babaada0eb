package sandboxtest

import (
	"errors"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestRecordsKeepTenancy: another owner's session is missing to Find,
// Get and Delete alike (and Delete leaves it), and List gives only the
// caller's.
func TestRecordsKeepTenancy(t *testing.T) {
	r := Records{
		"ses_a": {Owner: "alice", Info: sandbox.Info{ID: "ses_a"}},
		"ses_b": {Owner: "bob", Info: sandbox.Info{ID: "ses_b"}},
	}
	for _, tc := range []struct {
		owner, id string
		want      error
	}{
		{"alice", "ses_a", nil},
		{"alice", "ses_b", sandbox.ErrNotFound},
		{"alice", "ses_none", sandbox.ErrNotFound},
	} {
		if _, err := r.Find(tc.owner, tc.id); !errors.Is(err, tc.want) {
			t.Errorf("Find(%s, %s) = %v, want %v", tc.owner, tc.id, err, tc.want)
		}
		if info, err := r.Get(tc.owner, tc.id); !errors.Is(err, tc.want) || err == nil && info.ID != tc.id {
			t.Errorf("Get(%s, %s) = %+v, %v; want %s, %v", tc.owner, tc.id, info, err, tc.id, tc.want)
		}
	}
	if got := r.List("alice"); len(got) != 1 || got[0].ID != "ses_a" {
		t.Errorf("List(alice) = %+v, want ses_a alone", got)
	}
	if err := r.Delete("alice", "ses_b"); !errors.Is(err, sandbox.ErrNotFound) || r["ses_b"] == nil {
		t.Errorf("Delete of bob's session by alice = %v, left %v; want ErrNotFound, the session kept", err, r["ses_b"] != nil)
	}
	if err := r.Delete("alice", "ses_a"); err != nil || len(r.List("alice")) != 0 {
		t.Errorf("Delete(alice, ses_a) = %v, then List = %v; want nil and none", err, r.List("alice"))
	}
}
