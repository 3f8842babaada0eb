package native

import (
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestHostIDLeasesAreExclusive takes many leases at once: no id may be
// handed out twice while held, and a released id is free again.
func TestHostIDLeasesAreExclusive(t *testing.T) {
	testhost.RequireRoot(t)
	held := map[uint32]*hostID{}
	for range 200 {
		h, err := leaseHostID()
		if err != nil {
			t.Fatalf("leaseHostID() = %v", err)
		}
		if h.id < idPoolBase || h.id >= idPoolBase+idPoolSize {
			t.Fatalf("lease %#x is outside the pool", h.id)
		}
		if _, dup := held[h.id]; dup {
			t.Fatalf("id %#x leased twice", h.id)
		}
		held[h.id] = h
	}
	for _, h := range held {
		h.release()
	}
}
