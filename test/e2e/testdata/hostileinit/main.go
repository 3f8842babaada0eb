// Command hostileinit is a warden-init for the protocol tests: the real
// init and spawner, except for a sandbox whose Config carries
// WARDEN_TEST_BOX=MODE in its environment, where it acts as a broken or
// hostile box would:
//
//   - exited-without-status, garbage: in a session it speaks the handshake
//     (ready, with a /workspace the host can open), then answers the first
//     spawn request with an exited event that has no status, or with bytes
//     that are not JSON; then it waits to be killed (at most two minutes).
//     In a one-shot run it answers with an empty status line, or with those
//     bytes, and exits;
//   - silent: it speaks the handshake, reports the first spawn started
//     (a pid that does not exist) and then says nothing more, leaving
//     every later request unread, until killed (at most two minutes);
//   - refuse: it refuses the Config as an init of the next protocol
//     version would;
//   - unversioned: it exits as an init from before versioning does, having
//     read the magic as a length too large to take.
//
// It only ever talks to its own control socket, and mounts only as PID 1
// (of a box's PID namespace) in a mount namespace it unshares first.
package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spawn"
)

// init pins main to the main thread, as cmd/warden-init does.
func init() { runtime.LockOSThread() }

func main() {
	if nsinit.IsProbe(os.Args) {
		nsinit.Main()
	}
	if nsinit.IsInit(os.Args) {
		mode, err := peekMode()
		if err != nil {
			fmt.Fprintf(os.Stderr, "hostileinit: %v\n", err)
			os.Exit(1)
		}
		if mode != "" {
			os.Exit(hostile(mode))
		}
		nsinit.Main()
	}
	if spawn.IsSpawner(os.Args) {
		spawn.Main()
	}
	fmt.Fprintln(os.Stderr, "hostileinit is started by warden as a sandbox's init")
	os.Exit(2)
}

// modeRE finds the mode in the Config's JSON.
var modeRE = regexp.MustCompile(`"WARDEN_TEST_BOX=([a-z-]+)"`)

// peekWait bounds the wait for the whole Config frame.
const peekWait = 60 * time.Second

// peekMode reads the Config frame without taking it off the socket and
// returns the mode it names, or "" for none or a socket that ended first
// (the real init then reports it). It waits for the whole frame for at
// most peekWait and fails after that, rather than run as the real init
// with a mode unread.
func peekMode() (string, error) {
	buf := make([]byte, 1<<20)
	deadline := time.Now().Add(peekWait)
	for time.Now().Before(deadline) {
		fds := []unix.PollFd{{Fd: nsinit.ControlFD, Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(time.Until(deadline).Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			return "", fmt.Errorf("waiting for the config: %w", err)
		}
		n, _, err := unix.Recvfrom(nsinit.ControlFD, buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		switch {
		case err == nil && n == 0:
			return "", nil
		case err == nil && n >= 12 && n >= 12+int(binary.BigEndian.Uint32(buf[8:12])):
			if m := modeRE.FindSubmatch(buf[:n]); m != nil {
				return string(m[1]), nil
			}
			return "", nil
		case err != nil && !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR):
			return "", fmt.Errorf("peeking at the config: %w", err)
		}
		// Part of the frame: wait for the rest, which the poll would not.
		time.Sleep(10 * time.Millisecond)
	}
	return "", fmt.Errorf("no whole config frame within %s", peekWait)
}

// hostile acts out mode on the control socket and returns the exit code.
func hostile(mode string) int {
	ctl := os.NewFile(nsinit.ControlFD, "control")
	if mode == "unversioned" {
		var n [4]byte
		_, _ = io.ReadFull(ctl, n[:]) // waits for the host's first bytes, whatever they are
		return 111
	}
	var head [12]byte
	if _, err := io.ReadFull(ctl, head[:]); err != nil {
		return 1
	}
	body := make([]byte, binary.BigEndian.Uint32(head[8:]))
	if _, err := io.ReadFull(ctl, body); err != nil {
		return 1
	}
	var cfg nsinit.Config
	if err := json.Unmarshal(body, &cfg); err != nil {
		return 1
	}
	if mode == "refuse" {
		why := fmt.Sprintf("warden-init speaks protocol version %d but warden sent version %d: reinstall warden-init from the same build as warden", nsinit.Version+1, nsinit.Version)
		_ = json.NewEncoder(ctl).Encode(nsinit.NewRefusal(why)) // the test reads what the host makes of it; a host gone has nothing to read
		return 112
	}
	if !cfg.Session {
		return oneShot(ctl, mode)
	}
	if cfg.AwaitCgroup {
		// The cgroup's tasks descriptors, which a plain read discards.
		var b [1]byte
		_, _ = ctl.Read(b[:]) // a short or failed read shows in the next step's
	}
	if err := fakeRoot(); err != nil {
		fmt.Fprintf(os.Stderr, "hostileinit: %v\n", err)
		return 1
	}
	if _, err := ctl.WriteString(`{"kind":"ready"}` + "\n"); err != nil {
		return 1
	}
	id, err := firstSpawn(ctl)
	if err != nil {
		return 1
	}
	switch mode {
	case "silent":
		fmt.Fprintf(ctl, `{"kind":"started","id":%d,"pid":2}`+"\n", id)
	case "exited-without-status":
		fmt.Fprintf(ctl, `{"kind":"exited","id":%d}`+"\n", id)
	case "garbage":
		_, _ = ctl.Write([]byte("\x00\xff{not json at all\n")) // the test reads what the host makes of it; a host gone has nothing to read
	}
	time.Sleep(2 * time.Minute)
	return 0
}

// oneShot acts out mode for a one-shot run, whose init answers with one
// status line: an empty one for exited-without-status, bytes that are not
// JSON for garbage.
func oneShot(ctl *os.File, mode string) int {
	line := "\n"
	if mode == "garbage" {
		line = "\x00\xff{not json at all\n"
	}
	if _, err := ctl.WriteString(line); err != nil {
		return 1
	}
	return 0
}

// fakeRoot gives the box a root with a /workspace the host can open
// through /proc/PID/root: a tmpfs on /tmp of this mount namespace alone,
// made by the main thread, which is the one locked and acting.
func fakeRoot() error {
	// Mounting over /tmp and pivoting is only harmless inside a box: as
	// PID 1 of its own PID namespace, and in a mount namespace of its own.
	if os.Getpid() != 1 {
		return fmt.Errorf("refusing to build a fake root as pid %d: not in a box", os.Getpid())
	}
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unsharing the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mounts private: %w", err)
	}
	if err := unix.Mount("tmpfs", "/tmp", "tmpfs", 0, "size=1m"); err != nil {
		return fmt.Errorf("mounting a tmpfs: %w", err)
	}
	// The init's own uid is not mapped in the box; the sandbox user's is.
	// setfsgid and setfsuid cannot report failure (their errors are
	// always nil); a switch that did not take fails the Mkdir below.
	_ = unix.Setfsgid(nsinit.SandboxGID)
	_ = unix.Setfsuid(nsinit.SandboxUID) // cannot report failure either
	for _, d := range []string{"/tmp/workspace", "/tmp/old"} {
		if err := os.Mkdir(d, 0o777); err != nil {
			return err
		}
	}
	if err := unix.PivotRoot("/tmp", "/tmp/old"); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	return unix.Chdir("/")
}

// firstSpawn reads request frames until a spawn and returns its ID.
func firstSpawn(ctl *os.File) (uint64, error) {
	for {
		var n [4]byte
		if _, err := io.ReadFull(ctl, n[:]); err != nil {
			return 0, err
		}
		body := make([]byte, binary.BigEndian.Uint32(n[:]))
		if _, err := io.ReadFull(ctl, body); err != nil {
			return 0, err
		}
		var req nsinit.Request
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&req); err != nil {
			return 0, err
		}
		if req.Op == nsinit.OpSpawn {
			return req.ID, nil
		}
	}
}
