package nsinit

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/warden-sandbox/warden/internal/plan"
)

// FromPlan is the Status the Go init would give for the outcome
// warden-exec reports in st, having applied p for cfg: the same exit
// codes (126 not executable, 127 not found, 128+N for a signal) and the
// same one-line texts, which warden-exec, sending only numbers, leaves to
// the host.
func FromPlan(p *plan.Plan, st plan.Status, cfg *Config) Status {
	switch st.Kind {
	case plan.StatusRan:
		return Status{ExitCode: int(st.ExitCode), Signal: int(st.Signal)}
	case plan.StatusExec:
		if len(cfg.Command) == 0 {
			return Status{Error: "the executor reported a start failure for a configuration without a command"}
		}
		name, errno := cfg.Command[0], syscall.Errno(st.Errno)
		if st.Op == plan.ExecLookup {
			return lookupFailed(lookupErr(name, cfg.Env, errno, seenRoot(cfg)))
		}
		return startFailed(name, &os.PathError{Op: "fork/exec", Path: pathTried(name, cfg.Env, int(st.Op-plan.ExecExecve)), Err: errno})
	case plan.StatusSetup:
		// A check that fails is worded as its context alone, as
		// rootfs words it for the Go init (rootfs.explain).
		if st.Op >= 0 && int(st.Op) < len(p.Ops) && p.Ops[st.Op].Code == plan.CheckDir {
			return Status{Error: p.Ops[st.Op].Context}
		}
	}
	return Status{Error: p.Err(st).Error()}
}

// lookupErr is the error lookPath gives where warden-exec's lookup of
// name failed with errno (ENOENT not found, ENOEXEC not executable, else
// stat's errno, which only a name with a slash reports).
func lookupErr(name string, env []string, errno syscall.Errno, sees string) error {
	if !strings.Contains(name, "/") {
		return notFoundOnPath(name, pathOf(env), sees)
	}
	p := absCommand(name)
	switch errno {
	case syscall.ENOENT:
		return notFoundAt(p, sees)
	case syscall.ENOEXEC:
		return notExecutable(p)
	}
	return &os.PathError{Op: "stat", Path: p, Err: errno}
}

// absCommand is a command with a slash as lookPath resolves it.
func absCommand(name string) string {
	if filepath.IsAbs(name) {
		return name
	}
	return filepath.Join(workdir, name)
}

// pathTried is the path lookPath finds name at in PATH entry entry of
// env's PATH, the name itself when it holds a slash: the path execve
// failed on.
func pathTried(name string, env []string, entry int) string {
	if strings.Contains(name, "/") {
		return absCommand(name)
	}
	dirs := filepath.SplitList(pathOf(env))
	if entry < 0 || entry >= len(dirs) {
		return name
	}
	return filepath.Join(dirs[entry], name)
}
