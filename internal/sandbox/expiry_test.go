package sandbox

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestSetExpiry: the expiry moves to ttl from the call, both ways, within
// the session's longest life, and only for the session's owner.
func TestSetExpiry(t *testing.T) {
	m, _ := newTestManager(t, Config{MaxTTL: 2 * time.Hour})
	ctx := context.Background()
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	gone, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Delete(ctx, "alice", gone.ID); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, owner, id string
		ttl             time.Duration
		want            error
	}{
		{"shorter", "alice", info.ID, time.Minute, nil},
		{"longer", "alice", info.ID, 90 * time.Minute, nil},
		{"past the longest life", "alice", info.ID, 3 * time.Hour, spec.ErrInvalid},
		{"zero", "alice", info.ID, 0, spec.ErrInvalid},
		{"negative", "alice", info.ID, -time.Second, spec.ErrInvalid},
		{"another owner", "bob", info.ID, time.Minute, ErrNotFound},
		{"deleted", "alice", gone.ID, time.Minute, ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := time.Now()
			got, err := m.SetExpiry(context.Background(), tt.owner, tt.id, tt.ttl)
			after := time.Now()
			if !errors.Is(err, tt.want) {
				t.Fatalf("SetExpiry(%s, %v) = %v, want %v", tt.owner, tt.ttl, err, tt.want)
			}
			if tt.want != nil {
				return
			}
			if got.ExpiresAt.Before(before.Add(tt.ttl)) || got.ExpiresAt.After(after.Add(tt.ttl)) {
				t.Errorf("expires at %v, want %v from the call (%v..%v)", got.ExpiresAt, tt.ttl, before.Add(tt.ttl), after.Add(tt.ttl))
			}
			if now, _ := m.Get(context.Background(), "alice", info.ID); !now.ExpiresAt.Equal(got.ExpiresAt) {
				t.Errorf("Get says expires at %v, SetExpiry said %v", now.ExpiresAt, got.ExpiresAt)
			}
		})
	}
}

// TestSetExpiryReaps: the reaper ends a session at the expiry SetExpiry
// set, not at the one it was created with.
func TestSetExpiryReaps(t *testing.T) {
	m, b := newTestManager(t, Config{ReapEvery: 5 * time.Millisecond})
	info, err := m.Create(context.Background(), "alice", defaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.SetExpiry(context.Background(), "alice", info.ID, 20*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for len(m.List("alice")) > 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := len(m.List("alice")); n != 0 {
		t.Fatalf("%d sessions left after their new expiry, want 0", n)
	}
	if b.alive() != 0 {
		t.Errorf("%d boxes alive, want 0", b.alive())
	}
}
