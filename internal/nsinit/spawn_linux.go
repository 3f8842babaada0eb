package nsinit

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/seccomp"
)

// keptCaps are what this thread still needs after lockdown: setting the
// child's ids between fork and exec, and signalling the sandbox's
// processes. The child loses them at exec (its uid is not root here, the
// bounding, inheritable and ambient sets are empty).
var keptCaps = []uintptr{unix.CAP_SETUID, unix.CAP_SETGID, unix.CAP_KILL}

// agentCaps are what lockdown keeps: keptCaps, or none in the user's
// agent, which is the sandbox user already (becomeUser).
var agentCaps = keptCaps

// spawn locks down this thread in the order the kernel requires
// (capabilities, then no_new_privs, then seccomp, last so it covers
// everything after) and forks the program from it.
func spawn(path string, cfg *Config) (int, error) {
	if err := lockdown(cfg); err != nil {
		return 0, lockdownError{err}
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   cfg.Command,
		Env:    cfg.Env,
		Dir:    workdir,
		Stdin:  os.Stdin,
		Stdout: os.Stdout,
		Stderr: os.Stderr,
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true,
			Credential: &syscall.Credential{Uid: uint32(userUID), Gid: uint32(userGID), NoSetGroups: true},
		},
	}
	restore := unignoreSignals()
	err := cmd.Start()
	restore()
	if err != nil {
		return 0, err
	}
	return cmd.Process.Pid, nil
}

// lockdownError is a failure to lock down, which is Warden's, unlike a
// failure to start the program.
type lockdownError struct{ error }

func (e lockdownError) Unwrap() error { return e.error }

// lockdown drops this thread's privileges and installs the seccomp
// filter: in a box whose kernel is the host's, the one that sends
// sysinfo(2) to the init's answerer, which it waits for first (starting
// it if joinCgroup did not), so that no call ever waits for an answerer
// that is not there.
func lockdown(cfg *Config) error {
	if !cfg.KernelSysinfo {
		startAnswerer(nil, -1, cfg.View.MemoryBytes)
		if err := awaitAnswerer(); err != nil {
			return err
		}
		if err := sysinfoAnswerer.openProc(); err != nil {
			return err
		}
	}
	if err := dropBounding(); err != nil {
		return err
	}
	// EINVAL: a kernel without ambient capabilities (gVisor's among
	// them), where there are none to clear.
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	if err := keepOnly(agentCaps); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	// The seccomp package's errors say what failed.
	if cfg.KernelSysinfo {
		return seccomp.InstallOnThread()
	}
	listener, err := seccomp.InstallNotifying()
	if err != nil {
		return err
	}
	sysinfoAnswerer.listener <- listener
	return nil
}

// dropBounding empties the bounding set; a capability already out of it
// is skipped, so a thread without CAP_SETPCAP whose set is empty passes.
func dropBounding() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if in, err := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); err == nil && in == 0 {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping bounding capability %d: %w", c, err)
		}
	}
	return nil
}

// capSets are the capset(2) header and data that make caps the permitted
// and effective sets, and the inheritable set empty.
func capSets(caps []uintptr) (unix.CapUserHeader, [2]unix.CapUserData) {
	var data [2]unix.CapUserData
	for _, c := range caps {
		data[c/32].Permitted |= 1 << (c % 32)
	}
	data[0].Effective, data[1].Effective = data[0].Permitted, data[1].Permitted
	return unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, data
}

// keepOnly sets this thread's permitted and effective capabilities to caps
// and its inheritable set to nothing.
func keepOnly(caps []uintptr) error {
	hdr, data := capSets(caps)
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// errNotExecutable is a command that exists but cannot be run: exit 126,
// as a shell would say, rather than 127 for one that does not exist.
var errNotExecutable = errors.New("not an executable file")

// workdir is the program's working directory.
const workdir = "/workspace"

// seenRoot names the root tree a sandbox of cfg runs on, so a "not
// found" error says where the command was looked for: a template's root
// or the host's /usr.
func seenRoot(cfg *Config) string {
	if cfg.Root != "" {
		return "the sandbox's root is its template's tree"
	}
	return "the sandbox sees the host's /usr"
}

// lookPath finds the command on the PATH the program will get, inside the
// new root, so "not found" means not found in the sandbox; sees is
// seenRoot's.
func lookPath(name string, env []string, sees string) (string, error) {
	return lookPathIn(name, env, workdir, sees)
}

// lookPathIn is lookPath for a program whose working directory is dir.
func lookPathIn(name string, env []string, dir, sees string) (string, error) {
	if strings.Contains(name, "/") {
		if !filepath.IsAbs(name) {
			name = filepath.Join(dir, name)
		}
		return name, checkExecutable(name, sees)
	}
	path := pathOf(env)
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if checkExecutable(p, sees) == nil {
			return p, nil
		}
	}
	return "", notFoundOnPath(name, path, sees)
}

// pathOf is the PATH the program gets with env, lookPath's default if
// none.
func pathOf(env []string) string {
	path := "/usr/bin:/bin"
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	return path
}

// notFoundOnPath is lookPath's error for a name found in no directory of
// path; sees is seenRoot's.
func notFoundOnPath(name, path, sees string) error {
	return fmt.Errorf("command %q not found in the sandbox (PATH=%s); %s and the workspace", name, path, sees)
}

// notFoundAt is checkExecutable's error for a path that does not exist.
func notFoundAt(p, sees string) error {
	return fmt.Errorf("command %q not found in the sandbox; %s and the workspace", p, sees)
}

// notExecutable is checkExecutable's error for a directory or a file
// without an execute bit.
func notExecutable(p string) error { return fmt.Errorf("command %q: %w", p, errNotExecutable) }

// lookupFailed is the status of a command lookPath could not find or
// use: 126 for one that is not executable, 127 otherwise, as a shell.
func lookupFailed(err error) Status {
	if errors.Is(err, errNotExecutable) {
		return Status{ExitCode: 126, StartFailed: true, Error: err.Error()}
	}
	return Status{ExitCode: 127, StartFailed: true, Error: err.Error()}
}

// startFailed is the status of a program name whose start failed with
// err (execve's, or the forked child's set-up): 127 when a file was
// missing (an interpreter, most often), else 126.
func startFailed(name string, err error) Status {
	if errors.Is(err, os.ErrNotExist) {
		return Status{ExitCode: 127, StartFailed: true, Error: fmt.Sprintf("starting %q: %v (a missing interpreter?)", name, err)}
	}
	return Status{ExitCode: 126, StartFailed: true, Error: fmt.Sprintf("starting %q: %v", name, err)}
}

// checkExecutable says p is an executable file, or why not; sees is
// seenRoot's.
func checkExecutable(p, sees string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return notFoundAt(p, sees)
		}
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return notExecutable(p)
	}
	return nil
}

// startProcess forks one session process from this locked-down thread. It
// returns a Status instead of a pid when the process could not start, with
// the exit code a shell would give.
// It owns files and closes them.
func startProcess(req Request, files []int, sees string) (int, *Status) {
	osFiles := make([]*os.File, len(files))
	for i, fd := range files {
		osFiles[i] = os.NewFile(uintptr(fd), "")
	}
	defer func() {
		for _, f := range osFiles {
			f.Close()
		}
	}()
	dir := req.Dir
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workdir, dir)
	}
	path, err := lookPathIn(req.Argv[0], req.Env, dir, sees)
	if err != nil {
		code := 127
		if errors.Is(err, errNotExecutable) {
			code = 126
		}
		return 0, &Status{ExitCode: code, StartFailed: true, Error: err.Error()}
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return 0, &Status{ExitCode: 126, StartFailed: true, Error: fmt.Sprintf("working directory %q does not exist in the sandbox", dir)}
	}
	cmd := &exec.Cmd{
		Path: path, Args: req.Argv, Env: req.Env, Dir: dir,
		Stdin: osFiles[0], Stdout: osFiles[1], Stderr: osFiles[2], ExtraFiles: osFiles[3:],
		SysProcAttr: &syscall.SysProcAttr{
			Setsid:     true,
			Credential: &syscall.Credential{Uid: uint32(userUID), Gid: uint32(userGID), NoSetGroups: true},
		},
	}
	var errR *os.File
	if podMode {
		r, w, err := os.Pipe()
		if err != nil {
			return 0, &Status{ExitCode: 126, StartFailed: true, Error: fmt.Sprintf("starting %q: a pipe for the trampoline's errors: %v", req.Argv[0], err)}
		}
		defer closeLogged(r, "closing the trampoline's error pipe")
		errR = r
		// closed with the others on return; before that, once started
		osFiles = append(osFiles, w)
		cmd.ExtraFiles = osFiles[3:]
		cmd.Path, cmd.Args = podCommand(path, req.Argv, 2+len(cmd.ExtraFiles))
	}
	restore := unignoreSignals()
	err = cmd.Start()
	restore()
	if err != nil {
		return 0, &Status{ExitCode: 126, StartFailed: true, Error: fmt.Sprintf("starting %q: %v", req.Argv[0], err)}
	}
	pid := cmd.Process.Pid
	// The agent reaps with wait4; the pidfd os/exec holds would only pile
	// up until a garbage collection, against the session's open-files limit.
	_ = cmd.Process.Release()
	if errR != nil {
		// The write end must be closed here for the read to end at the exec.
		closeLogged(osFiles[len(osFiles)-1], "closing the trampoline's error pipe")
		if st := podStartReport(errR, req.Argv[0], path); st != nil {
			endTrampoline(pid)
			return 0, st
		}
	}
	return pid, nil
}
