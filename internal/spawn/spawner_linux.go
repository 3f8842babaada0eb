package spawn

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// connFD is the spawner's end of the socket pair.
const connFD = 3

// Main runs the spawner until the server closes its end, and never
// returns. Each request is served on its own goroutine, locked to its
// thread for as long as the init it started lives: an init's parent-death
// signal is tied to the thread that forked it.
func Main() {
	_ = unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0) // fails only on bad arguments
	// Each init gets its own descriptors from fd 3 on; this one must not
	// reach an init that was sent fewer.
	unix.CloseOnExec(connFD)
	s := &spawner{fd: connFD}
	for {
		var req request
		files, err := recv(s.fd, &req)
		if errors.Is(err, ErrNoDescriptors) {
			// The request came whole, its descriptors did not: this
			// process is at its RLIMIT_NOFILE. Only that request fails.
			s.reply(failure(req.ID, fmt.Errorf("receiving the request's descriptors: %w", unix.EMFILE)))
			continue
		}
		var undecoded *decodeError
		if errors.As(err, &undecoded) {
			// A server of another build: it hears why, and nothing starts.
			s.reply(unreadable(undecoded.raw, undecoded.err))
			continue
		}
		if err != nil {
			// The server is gone: end, and every init with this process.
			os.Exit(0)
		}
		go s.serve(req, files)
	}
}

type spawner struct {
	fd int
	mu sync.Mutex // one reply at a time
}

func (s *spawner) reply(r reply, files ...*os.File) {
	s.mu.Lock()
	defer s.mu.Unlock()
	// A reply that cannot be sent means the server's end is gone: there
	// is nobody to tell, and Main's next read ends the spawner.
	_ = send(s.fd, r, files...)
}

func (s *spawner) serve(req request, files []*os.File) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if req.Version != nsinit.Version {
		closeAll(files)
		s.reply(versionMismatch(req.ID, req.Version))
		return
	}
	switch req.Kind {
	case "init":
		s.startInit(req, files)
	case "userns":
		closeAll(files)
		ns, err := UserNamespace(req.Map.InsideUID, req.Map.HostUID, req.Map.InsideGID, req.Map.HostGID)
		if err != nil {
			s.reply(failure(req.ID, err))
			return
		}
		s.reply(reply{ID: req.ID}, ns)
		ns.Close()
	default:
		closeAll(files)
		s.reply(reply{ID: req.ID, Error: fmt.Sprintf("unknown request %q", req.Kind)})
	}
}

// startInit starts the init, answers with its pid and pidfd, then reaps
// it and says so.
func (s *spawner) startInit(req request, files []*os.File) {
	cmd, err := initCommand(req, files)
	if err == nil {
		err = StartError(req.Init, cmd.Start())
	}
	closeAll(files)
	if err != nil {
		s.reply(failure(req.ID, err))
		return
	}
	pidfd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
	if err != nil {
		// The pidfd's error is the one to report; a kill fails only once
		// the init has ended, and Wait only reaps it.
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // only reaps it
		s.reply(failure(req.ID, fmt.Errorf("opening a pidfd: %w", err)))
		return
	}
	pf := os.NewFile(uintptr(pidfd), "pidfd")
	s.reply(reply{ID: req.ID, Pid: cmd.Process.Pid}, pf)
	pf.Close()
	_ = cmd.Wait() // how the init ended is in ProcessState, sent below
	s.reply(reply{ID: req.ID, Exited: true, Exit: ExitOf(cmd.ProcessState)})
}

// initCommand is the init's command with the descriptors that came with
// req: stdin, stdout, stderr, the extras that were sent (nil for those
// that were not), and the cgroup directory last when asked for.
func initCommand(req request, files []*os.File) (*exec.Cmd, error) {
	sent := 0
	for _, ok := range req.Extra {
		sent += boolInt(ok)
	}
	if len(req.Extra) > 8 || len(files) != 3+sent+boolInt(req.Cgroup) {
		return nil, fmt.Errorf("got %d descriptors for an init that was sent %d", len(files), 3+sent+boolInt(req.Cgroup))
	}
	next := 3
	var extra []*os.File
	for _, ok := range req.Extra {
		var f *os.File
		if ok {
			f = files[next]
			next++
		}
		extra = append(extra, f)
	}
	var cgroupDir *os.File
	if req.Cgroup {
		cgroupDir = files[next]
	}
	return Command(req.Init, [3]*os.File{files[0], files[1], files[2]}, extra, cgroupDir)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
