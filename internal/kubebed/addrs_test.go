package kubebed

import (
	"errors"
	"net/netip"
	"testing"
)

// TestAddrPool checks the simulated node's addresses: 254 distinct
// loopback hosts outside 127.0.0.0/24, then a clear error, and a freed
// address handed out again.
func TestAddrPool(t *testing.T) {
	p, err := newAddrPool()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for range 254 {
		a, err := p.get()
		if err != nil {
			t.Fatalf("get after %d addresses: %v", len(seen), err)
		}
		b := a.As4()
		if !a.IsLoopback() || b[1] == 0 || b[3] == 0 || b[3] == 255 || seen[a.String()] {
			t.Fatalf("got %s, want a new host address in 127.0.0.0/8 outside 127.0.0.0/24 (seen %d)", a, len(seen))
		}
		seen[a.String()] = true
	}
	if _, err := p.get(); !errors.Is(err, errPoolFull) {
		t.Fatalf("255th get: got %v, want errPoolFull", err)
	}
	freed := netip.AddrFrom4([4]byte{p.base[0], p.base[1], p.base[2], 77})
	p.put(freed)
	if got, err := p.get(); err != nil || got != freed {
		t.Fatalf("get after freeing %s: got %s, %v; want %s", freed, got, err, freed)
	}
}
