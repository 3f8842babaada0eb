package hostid

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// idPoolFile is where leases are taken: byte N of it, locked, is id
// idPoolBase+N. The directory and file are root's alone, so no other user
// can squat the pool; the locks are open-file-description locks, which the
// kernel drops when the holder dies however it dies, so a crash never
// leaks an id. The file stays empty.
const idPoolFile = "/run/warden/idpool"

// Lease is one id from the pool, held until Release.
type Lease struct {
	id   uint32
	pool *os.File
}

// ID is the leased host id, used as both uid and gid.
func (h *Lease) ID() int { return int(h.id) }

// Take leases a free id, starting at a random slot so concurrent warden
// processes rarely collide.
func Take() (*Lease, error) {
	pool, err := openPool()
	if err != nil {
		return nil, fmt.Errorf("leasing a host uid: %w", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		pool.Close()
		return nil, err
	}
	start := binary.LittleEndian.Uint32(b[:]) % idPoolSize
	for i := uint32(0); i < idPoolSize; i++ {
		slot := (start + i) % idPoolSize
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(slot), Len: 1}
		err := unix.FcntlFlock(pool.Fd(), unix.F_OFD_SETLK, &lk)
		if err == nil {
			return &Lease{id: idPoolBase + slot, pool: pool}, nil
		}
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EACCES) {
			pool.Close()
			return nil, fmt.Errorf("leasing a host uid: %w", err)
		}
	}
	pool.Close()
	return nil, fmt.Errorf("leasing a host uid: all %d ids of the pool are in use", idPoolSize)
}

func openPool() (*os.File, error) {
	if err := os.MkdirAll("/run/warden", 0o700); err != nil {
		return nil, err
	}
	return os.OpenFile(idPoolFile, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
}

// Release gives the id back: closing the file description drops its lock.
func (h *Lease) Release() { h.pool.Close() }
