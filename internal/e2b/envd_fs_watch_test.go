package e2b

import (
	"fmt"
	"testing"
)

// TestWatcherShares: each API key may hold its share of the host's
// watchers (at most maxWatchersPerOwner), so a few keys cannot take every
// slot from the rest.
func TestWatcherShares(t *testing.T) {
	tests := []struct{ owners, want int }{
		{0, maxWatchersPerOwner}, {1, maxWatchersPerOwner}, {4, maxWatchersPerOwner},
		{8, maxWatchersPerHost / 8}, {100, 1},
	}
	for _, tt := range tests {
		ws := newWatchers(tt.owners)
		got := 0
		for i := range maxWatchersPerHost {
			// Each in its own sandbox, so only the owner's bound applies.
			if _, _, err := ws.reserve("alice", fmt.Sprintf("box%d", i)); err != nil {
				break
			}
			got++
		}
		if got != tt.want {
			t.Errorf("%d owners: one owner took %d watchers, want %d", tt.owners, got, tt.want)
		}
	}
}

// TestReserveKilledAtOnce: the kill channel comes with the slot, so a
// kill right after reserve (while the watch is still starting) closes it,
// and a slot of another sandbox is not ended.
func TestReserveKilledAtOnce(t *testing.T) {
	ws := newWatchers(0)
	_, killed, err := ws.reserve("alice", "box1")
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	_, other, err := ws.reserve("alice", "box2")
	if err != nil {
		t.Fatalf("reserve: %v", err)
	}
	ws.sandboxKilled("box1")
	select {
	case <-killed:
	default:
		t.Error("box1's kill channel still open after sandboxKilled(box1); want closed")
	}
	select {
	case <-other:
		t.Error("box2's kill channel closed by sandboxKilled(box1); want open")
	default:
	}
}
