package native

import (
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// Host ids for sandboxes run by root come from a block no distribution
// hands out (subordinate ranges start at 100000 and grow by 65536), so a
// sandbox's files and processes never share an identity with a real user,
// and no two live sandboxes share one with each other.
const (
	idPoolBase = 0x7E000000
	idPoolSize = 1 << 16
)

// hostID is one lease from the pool. The lease is an abstract unix socket
// bound to a name derived from the id: the kernel releases it when the
// process dies, however it dies, so a crash never leaks an id and there is
// no state file to clean.
type hostID struct {
	id   uint32
	lock int
}

// leaseHostID takes a free id, starting at a random slot so concurrent
// warden processes rarely collide.
func leaseHostID() (*hostID, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	start := binary.LittleEndian.Uint32(b[:]) % idPoolSize
	for i := uint32(0); i < idPoolSize; i++ {
		id := idPoolBase + (start+i)%idPoolSize
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("leasing a host uid: %w", err)
		}
		name := "\x00warden/id/" + strconv.FormatUint(uint64(id), 10)
		if err := unix.Bind(fd, &unix.SockaddrUnix{Name: name}); err == nil {
			return &hostID{id: id, lock: fd}, nil
		}
		unix.Close(fd)
	}
	return nil, fmt.Errorf("leasing a host uid: all %d ids of the pool are in use", idPoolSize)
}

func (h *hostID) release() { unix.Close(h.lock) }

// idMapping says which host ids the sandbox user maps to. Root leases one
// from the pool; an ordinary user can only map its own ids (the rootless
// mode), which the kernel permits without setuid helpers.
type idMapping struct {
	uid, gid int
	rootless bool
	lease    *hostID
}

func newIDMapping() (*idMapping, error) {
	if os.Geteuid() != 0 {
		return &idMapping{uid: os.Geteuid(), gid: os.Getegid(), rootless: true}, nil
	}
	h, err := leaseHostID()
	if err != nil {
		return nil, err
	}
	return &idMapping{uid: int(h.id), gid: int(h.id), lease: h}, nil
}

func (m *idMapping) release() {
	if m.lease != nil {
		m.lease.release()
	}
}
