package e2b

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/e2b/filesystempb"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// inotifyMask is what a watch asks of each directory: the changes envd
// reports (fsnotify's set, without the *_SELF events, which the parent's
// watch reports as well).
const inotifyMask = unix.IN_CREATE | unix.IN_MOVED_TO | unix.IN_MOVED_FROM |
	unix.IN_MODIFY | unix.IN_ATTRIB | unix.IN_DELETE

// inotifyTree is an inotify instance watching a directory of the
// workspace, or a tree of them. The host reads the box's changes
// directly: the workspace is a host directory for every backend (native,
// Docker, gVisor bind it from a host tmpfs), and each directory is added
// through workspace.Dir.AddWatch, which opens it link-safely as the
// sandbox user, so a planted link never moves a watch outside.
type inotifyTree struct {
	f         *os.File // the instance, non-blocking, read through the poller
	dir       workspace.Files
	root      string // box path of the watched directory
	recursive bool
	dirs      map[int32]string // watch descriptor -> box path of its directory
	buf       []byte
	left      int // entries the current walk may still visit
	added     int // directories added over the watch's life
}

// startWatch watches root (a box path under /workspace), and every
// directory below it when recursive, up to maxWatchDirs directories.
func startWatch(dir workspace.Files, root string, recursive bool) (*inotifyTree, error) {
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("creating an inotify instance: %w", err)
	}
	t := &inotifyTree{
		f:         os.NewFile(uintptr(fd), "inotify"),
		dir:       dir,
		root:      root,
		recursive: recursive,
		dirs:      map[int32]string{},
		buf:       make([]byte, 64<<10),
	}
	if _, err := t.walk(root, true); err != nil {
		return nil, errors.Join(err, t.Close())
	}
	return t, nil
}

// walk is add within a budget of maxListEntries entries, so a tree
// moved into a recursive watch costs a bounded walk and bounded memory.
func (t *inotifyTree) walk(p string, top bool) ([]change, error) {
	t.left = maxListEntries
	return t.add(p, top)
}

// add watches p, and when recursive the directories below it. A missing
// subdirectory (gone meanwhile) is skipped; past maxWatchDirs the watch
// fails, since it would silently miss changes otherwise. Below a new
// directory (not top), what the walk finds is reported as created: it
// may have been made before its directory was watched, which inotify
// would never report.
func (t *inotifyTree) add(p string, top bool) ([]change, error) {
	if len(t.dirs) >= maxWatchDirs {
		return nil, kindErrorf(errTooMany, "watching %q: more than %d directories; watch a subdirectory, or without recursive", e2bPath(t.root), maxWatchDirs)
	}
	if t.added >= maxWatchAdds {
		return nil, kindErrorf(errTooMany, "watching %q: %d directories were walked into the watch over its life (trees moved in and out), the most one watch may; watch again", e2bPath(t.root), maxWatchAdds)
	}
	t.added++
	wd, err := t.addWatch(p)
	if err != nil {
		if !top && skippable(err) {
			return nil, nil
		}
		return nil, err
	}
	t.dirs[int32(wd)] = p
	if !t.recursive {
		return nil, nil
	}
	ents, err := t.dir.List(p)
	if err != nil && !errors.Is(err, workspace.ErrTruncated) {
		if !top && skippable(err) {
			return nil, nil
		}
		return nil, err
	}
	if err != nil {
		return nil, kindErrorf(errTooMany, "watching %q: %v; watch a subdirectory, or without recursive", e2bPath(p), err)
	}
	var found []change
	for _, e := range ents {
		if t.left--; t.left < 0 {
			return found, kindErrorf(errTooMany, "watching %q: more than %d entries to walk at once; watch a subdirectory, or without recursive", e2bPath(t.root), maxListEntries)
		}
		ep := path.Join(boxHome, e.Path)
		if !top {
			found = append(found, t.change(ep, filesystempb.EventType_EVENT_TYPE_CREATE))
		}
		if e.Type != workspace.TypeDir {
			continue
		}
		below, err := t.add(ep, false)
		found = append(found, below...)
		if err != nil {
			return found, err
		}
	}
	return found, nil
}

// change is op on box path p, named relative to the watched directory.
func (t *inotifyTree) change(p string, op filesystempb.EventType) change {
	return change{name: strings.TrimPrefix(strings.TrimPrefix(p, t.root), "/"), path: p, op: op}
}

// addWatch adds p to the instance through its os.File, whose Control
// keeps the descriptor from being closed, and its number reused by
// another sandbox's watch, during the call.
func (t *inotifyTree) addWatch(p string) (int, error) {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return -1, fmt.Errorf("watching %q: %w", e2bPath(p), err)
	}
	wd, werr := -1, error(nil)
	if err := rc.Control(func(fd uintptr) { wd, werr = t.dir.AddWatch(int(fd), p, inotifyMask) }); err != nil {
		return -1, fmt.Errorf("watching %q: %w", e2bPath(p), err)
	}
	if errors.Is(werr, unix.ENOSPC) {
		return -1, kindErrorf(errTooMany, "%v", werr)
	}
	return wd, werr
}

// read waits for the next changes and returns them, names relative to the
// watched directory. It fails when the instance is closed, when the
// kernel's queue overflowed (changes were lost), or when the watched
// directory itself went away.
func (t *inotifyTree) read() ([]change, error) {
	n, err := t.f.Read(t.buf)
	if err != nil {
		return nil, err
	}
	var out []change
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		wd := int32(binary.NativeEndian.Uint32(t.buf[off:]))
		mask := binary.NativeEndian.Uint32(t.buf[off+4:])
		size := int(binary.NativeEndian.Uint32(t.buf[off+12:]))
		start := off + unix.SizeofInotifyEvent
		if size < 0 || start+size > n {
			return out, fmt.Errorf("reading inotify events: an event of %d bytes runs past the %d read", size, n)
		}
		name := strings.TrimRight(string(t.buf[start:start+size]), "\x00")
		off = start + size
		cs, err := t.event(wd, mask, name)
		out = append(out, cs...)
		if err != nil {
			return out, err
		}
	}
	return out, nil
}

// event turns one inotify event into changes, keeping the watch list up
// to date.
func (t *inotifyTree) event(wd int32, mask uint32, name string) ([]change, error) {
	if mask&unix.IN_Q_OVERFLOW != 0 {
		return nil, kindErrorf(errEventsLost, "watching %q: the kernel's event queue overflowed and changes were lost; watch again", e2bPath(t.root))
	}
	d, ok := t.dirs[wd]
	if !ok {
		return nil, nil // a directory already let go
	}
	if mask&unix.IN_IGNORED != 0 {
		delete(t.dirs, wd)
		if d == t.root {
			return nil, kindErrorf(workspace.ErrNotFound, "watching %q: the directory was removed or the sandbox ended", e2bPath(t.root))
		}
		return nil, nil
	}
	if strings.HasPrefix(name, workspace.TempPrefix) {
		return nil, nil // an upload in progress: its rename into place is the event
	}
	p := path.Join(d, name)
	var out []change
	for _, op := range eventTypes(mask) {
		out = append(out, t.change(p, op))
	}
	if t.recursive && mask&unix.IN_ISDIR != 0 && mask&unix.IN_MOVED_FROM != 0 {
		t.forget(p)
	}
	if t.recursive && mask&unix.IN_ISDIR != 0 && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0 {
		found, err := t.walk(p, false)
		if err != nil {
			return out, err // the watch ends: what the walk found would only delay saying so
		}
		out = append(out, found...)
	}
	return out, nil
}

// forget stops watching directory p and those below it, which moved
// away: their watches would go on naming changes by the old path. If they
// moved within the tree, their IN_MOVED_TO watches them again.
func (t *inotifyTree) forget(p string) {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return // closed: nothing left to forget
	}
	for wd, d := range t.dirs {
		if d != p && !strings.HasPrefix(d, p+"/") {
			continue
		}
		delete(t.dirs, wd)
		// An error means the watch is gone already (the kernel drops it
		// with the directory); either way it reports nothing more here.
		_ = rc.Control(func(fd uintptr) { _, _ = unix.InotifyRmWatch(int(fd), uint32(wd)) })
	}
}

// eventTypes are the E2B events of an inotify mask, in envd's order.
func eventTypes(mask uint32) []filesystempb.EventType {
	var out []filesystempb.EventType
	for _, m := range []struct {
		bits uint32
		op   filesystempb.EventType
	}{
		{unix.IN_CREATE | unix.IN_MOVED_TO, filesystempb.EventType_EVENT_TYPE_CREATE},
		{unix.IN_MOVED_FROM, filesystempb.EventType_EVENT_TYPE_RENAME},
		{unix.IN_ATTRIB, filesystempb.EventType_EVENT_TYPE_CHMOD},
		{unix.IN_MODIFY, filesystempb.EventType_EVENT_TYPE_WRITE},
		{unix.IN_DELETE, filesystempb.EventType_EVENT_TYPE_REMOVE},
	} {
		if mask&m.bits != 0 {
			out = append(out, m.op)
		}
	}
	return out
}

// Close ends the watch; a read waiting meanwhile returns an error.
func (t *inotifyTree) Close() error {
	if err := t.f.Close(); err != nil {
		return fmt.Errorf("closing an inotify instance: %w", err)
	}
	return nil
}
