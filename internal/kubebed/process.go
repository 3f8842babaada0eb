package kubebed

import (
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopWait bounds how long a stopped process may take to exit after
// SIGTERM before it is killed, and after SIGKILL before Stop gives up.
const stopWait = 5 * time.Second

// logTail is how many bytes of a process's log a failure quotes.
const logTail = 4000

// process is one program the bed runs, its output in a log file under
// the bed's directory, so that a failure can quote its last lines.
type process struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error
}

// startProcess runs path with args, writing its output to dir/name.log.
// Off Linux it returns errors.ErrUnsupported.
func startProcess(dir, name, path string, args, env []string) (*process, error) {
	return startProcessWith(dir, name, path, args, env, nil, nil)
}

// startProcessWith is startProcess with stdin as the program's standard
// input (nil: /dev/null), which the caller keeps and closes, and after,
// when set, called once the program ended (not if it failed to start).
func startProcessWith(dir, name, path string, args, env []string, stdin *os.File, after func()) (*process, error) {
	if err := processesSupported(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	logPath := filepath.Join(dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("creating %s's log: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if stdin != nil {
		cmd.Stdin = stdin
	}
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = processGroup()
	if err := cmd.Start(); err != nil {
		// the log file was only opened for the program; the start's error is what matters
		_ = f.Close()
		return nil, fmt.Errorf("starting %s (%s): %w", name, path, err)
	}
	p := &process{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		// the log was written by the program and is read by path; a failed close loses nothing
		_ = f.Close()
		if after != nil {
			after()
		}
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended.
func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// tail is the end of the process's log, for a failure message and for
// the readiness check (PodProcess.Ready, the kubelet's serving).
func (p *process) tail() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return fmt.Sprintf("(reading %s: %v)", p.log, err)
	}
	if len(b) > logTail {
		b = b[len(b)-logTail:]
	}
	return strings.TrimSpace(string(b))
}

// stop ends the process: SIGTERM, then SIGKILL after stopWait, and waits
// (bounded) for it to be reaped. An exit caused by the signals is no error.
func (p *process) stop() error {
	if p.exited() {
		return nil
	}
	p.signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopWait):
	}
	p.signal(syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(stopWait):
		return fmt.Errorf("%s (pid %d) did not exit %v after SIGKILL", p.name, p.cmd.Process.Pid, stopWait)
	}
}

// signal sends sig to the process's group, logging a failure other than
// the group having gone already (ESRCH).
func (p *process) signal(sig syscall.Signal) {
	err := signalGroup(p.cmd.Process.Pid, sig)
	if err != nil && !errors.Is(err, syscall.ESRCH) {
		log.Printf("kubebed: signalling %s (pid %d) with %v: %v", p.name, p.cmd.Process.Pid, sig, err)
	}
}

// exitCode is how the ended process exited, as a container runtime
// reports it: its status, or 128 plus the signal that killed it.
func (p *process) exitCode() int32 {
	if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int32(ws.Signal())
	}
	return int32(p.cmd.ProcessState.ExitCode())
}

// exitError describes how the process ended, for a start that failed.
func (p *process) exitError() error {
	if p.err == nil {
		return errors.New(p.name + " exited")
	}
	return fmt.Errorf("%s exited: %w", p.name, p.err)
}
