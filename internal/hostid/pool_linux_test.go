package hostid

import (
	"errors"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestHostIDLeasesAreExclusive takes many leases at once: no id may be
// handed out twice while held.
func TestHostIDLeasesAreExclusive(t *testing.T) {
	testhost.RequireRoot(t)
	held := map[uint32]*Lease{}
	defer func() {
		for _, h := range held {
			h.Release()
		}
	}()
	for range 200 {
		h, err := Take()
		if err != nil {
			t.Fatalf("Take() = %v", err)
		}
		if h.id < idPoolBase || h.id >= idPoolBase+idPoolSize {
			t.Fatalf("lease %#x is outside the pool", h.id)
		}
		if _, dup := held[h.id]; dup {
			t.Fatalf("id %#x leased twice", h.id)
		}
		held[h.id] = h
	}
}

// TestHostIDLeaseLock checks the lock itself: while a lease is held another
// open of the pool cannot take its byte, and once released it can.
func TestHostIDLeaseLock(t *testing.T) {
	testhost.RequireRoot(t)
	h, err := Take()
	if err != nil {
		t.Fatalf("Take() = %v", err)
	}
	other, err := openPool()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	lock := func() error {
		lk := unix.Flock_t{Type: unix.F_WRLCK, Start: int64(h.id - idPoolBase), Len: 1}
		return unix.FcntlFlock(other.Fd(), unix.F_OFD_SETLK, &lk)
	}
	if err := lock(); !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
		t.Fatalf("locking a held id from another open = %v, want EAGAIN", err)
	}
	h.Release()
	if err := lock(); err != nil {
		t.Fatalf("locking a released id = %v, want success", err)
	}
}
