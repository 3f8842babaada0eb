package native

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/hostid"
	"github.com/warden-sandbox/warden/internal/spawn"
)

// idmappedWorkspace returns a detached mount of the workspace directory in
// which the directory's owner appears as the sandbox user: what the
// sandbox writes lands on disk owned by whoever owns the directory, and the
// directory's files are the sandbox's to change, while the sandbox's
// processes keep their own unprivileged host uid. The mount is nosuid and
// nodev; the seccomp filter also refuses to set set-id mode bits, so no
// set-uid file for the owner can be planted on the host.
//
// Only root can idmap a host file system. It returns (nil, nil) when the
// file system does not support idmapped mounts; the caller then binds the
// directory as it is.
func idmappedWorkspace(dir *os.File, hostUID, hostGID int) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
		return nil, fmt.Errorf("stat workspace: %w", err)
	}
	if st.Uid == 0 || st.Gid == 0 {
		// The sandbox would own every root-owned file below it: a
		// workspace of / or /etc would hand the host to the program. The
		// group counts too: it would write files of group root.
		return nil, fmt.Errorf("workspace %q is owned by root (user or group), and the sandbox writes as the workspace's owner: give it to a regular user and group first (chown USER: %[1]q)", dir.Name())
	}
	userns, err := mappingNamespace(int(st.Uid), hostUID, int(st.Gid), hostGID)
	if err != nil {
		return nil, fmt.Errorf("creating workspace id mapping: %w", err)
	}
	defer userns.Close()
	fd, err := unix.OpenTree(int(dir.Fd()), "", unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return nil, fmt.Errorf("cloning workspace mount: %w", err)
	}
	attr := unix.MountAttr{
		Attr_set:  unix.MOUNT_ATTR_IDMAP | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV,
		Userns_fd: uint64(userns.Fd()),
	}
	err = unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH, &attr)
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
		unix.Close(fd)
		return nil, nil
	}
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("idmapping workspace mount: %w", err)
	}
	return os.NewFile(uintptr(fd), dir.Name()), nil
}

// mappingNamespace returns a user namespace whose only mapping is the
// directory owner's ids (inside) to the sandbox's host ids (outside), the
// shape an idmapped mount needs: made by the spawner when there is one.
func mappingNamespace(ownerUID, hostUID, ownerGID, hostGID int) (*os.File, error) {
	if spawner != nil {
		return spawner.UserNamespace(ownerUID, hostUID, ownerGID, hostGID)
	}
	return spawn.UserNamespace(ownerUID, hostUID, ownerGID, hostGID)
}

// idMapping says which host ids the sandbox user maps to. Root leases one
// from the pool; an ordinary user can only map its own ids (the rootless
// mode), which the kernel permits without setuid helpers.
type idMapping struct {
	uid, gid int
	rootless bool
	lease    *hostid.Lease
}

func newIDMapping() (*idMapping, error) {
	if os.Geteuid() != 0 {
		return &idMapping{uid: os.Geteuid(), gid: os.Getegid(), rootless: true}, nil
	}
	h, err := hostid.Take()
	if err != nil {
		return nil, err
	}
	return &idMapping{uid: h.ID(), gid: h.ID(), lease: h}, nil
}

func (m *idMapping) release() {
	if m.lease != nil {
		m.lease.Release()
	}
}

// IdmapsTmpfs says whether the kernel can idmap a tmpfs mount, which
// persistent session workspaces need: Linux 6.3 added it.
func IdmapsTmpfs() bool {
	var u unix.Utsname
	if unix.Uname(&u) != nil {
		return false
	}
	return kernelAtLeast(unix.ByteSliceToString(u.Release[:]), 6, 3)
}

// kernelAtLeast compares a release string ("6.1.0-18-amd64") with
// major.minor.
func kernelAtLeast(release string, major, minor int) bool {
	var maj, min int
	if _, err := fmt.Sscanf(release, "%d.%d", &maj, &min); err != nil {
		return false
	}
	return maj > major || maj == major && min >= minor
}
