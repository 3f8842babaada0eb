package kubeback_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// testListEverywhere: two replicas each holding one of the owner's
// sessions both list the two, each once and ready (what
// GET /sessions answers behind a Service); another owner lists none;
// a deleted session leaves both listings.
func testListEverywhere(ctx context.Context, t *testing.T, bed *kubebed.Bed, a *sandbox.Manager) {
	b, _ := replica(t, bed)
	first := create(ctx, t, a, time.Hour)
	second := create(ctx, t, b, time.Hour)
	for name, m := range map[string]*sandbox.Manager{"a": a, "b": b} {
		checkListed(ctx, t, name, m, owner, first.ID, second.ID)
		checkListed(ctx, t, name, m, "other")
	}
	if err := b.Delete(ctx, owner, second.ID); err != nil {
		t.Fatal(err)
	}
	checkListed(ctx, t, "a after b's delete", a, owner, first.ID)
	if err := a.Delete(ctx, owner, first.ID); err != nil {
		t.Fatal(err)
	}
}

// checkListed checks that replica name's m lists exactly ids for who,
// each once and ready, oldest first (a claim's creation time has whole
// seconds, so two sessions made within one may list in either order).
func checkListed(ctx context.Context, t *testing.T, name string, m *sandbox.Manager, who string, ids ...string) {
	t.Helper()
	got, err := m.ListEverywhere(ctx, who)
	if err != nil {
		t.Fatalf("replica %s lists %s's sessions: %v", name, who, err)
	}
	var listed []string
	for k, i := range got {
		listed = append(listed, i.ID)
		if i.State != sandbox.StateReady {
			t.Errorf("replica %s lists %s as %s %q, want ready", name, i.ID, i.State, i.Reason)
		}
		if k > 0 && i.CreatedAt.Before(got[k-1].CreatedAt) {
			t.Errorf("replica %s lists %s (made %v) after %s (made %v), want oldest first", name, i.ID, i.CreatedAt, got[k-1].ID, got[k-1].CreatedAt)
		}
	}
	slices.Sort(listed)
	want := slices.Sorted(slices.Values(ids))
	if !slices.Equal(listed, want) {
		t.Errorf("replica %s lists %s's sessions %v, want %v, each once", name, who, listed, want)
	}
}
