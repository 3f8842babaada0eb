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
			if _, err := ws.reserve("alice", fmt.Sprintf("box%d", i)); err != nil {
				break
			}
			got++
		}
		if got != tt.want {
			t.Errorf("%d owners: one owner took %d watchers, want %d", tt.owners, got, tt.want)
		}
	}
}
