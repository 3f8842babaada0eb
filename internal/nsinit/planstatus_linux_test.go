package nsinit

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/warden-sandbox/warden/internal/plan"
)

// TestFromPlan: the status warden-exec reports becomes the very Status
// the Go init gives for the same outcome, texts included: the wanted
// ones come from the Go init's own lookup and start.
func TestFromPlan(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	notExec := write("notexec", "#!/bin/sh\n", 0o644)
	noInterp := write("nointerp", "#!/no/such/interpreter\n", 0o755)
	path := []string{"PATH=/no/such/dir:" + dir}
	sees := seenRoot(&Config{})
	// goLookup is the Go init's status for a command it could not find.
	goLookup := func(name string, env []string) Status {
		_, err := lookPath(name, env, sees)
		if err == nil {
			t.Fatalf("the Go init found %q", name)
		}
		return lookupFailed(err)
	}
	// goStart is the Go init's status for a command found at p whose
	// start fails.
	goStart := func(name, p string) Status {
		err := (&exec.Cmd{Path: p, Args: []string{name}}).Start()
		if err == nil {
			t.Fatalf("%s started", p)
		}
		return startFailed(name, err)
	}
	p := &plan.Plan{Ops: []plan.Op{{Code: plan.Chdir, Strs: []string{"/"}, Context: "building the root: entering it"},
		{Code: plan.CheckDir, Strs: []string{"/x"}, Context: "building the root: binding /x: /x is not a directory"}}}
	tests := []struct {
		name string
		cmd  []string
		env  []string
		st   plan.Status
		want Status
	}{
		{"exit", []string{"true"}, nil, plan.Status{Kind: plan.StatusRan, ExitCode: 3}, Status{ExitCode: 3}},
		{"signal", []string{"true"}, nil, plan.Status{Kind: plan.StatusRan, ExitCode: 137, Signal: 9}, Status{ExitCode: 137, Signal: 9}},
		{"set-up", []string{"true"}, nil, plan.Status{Kind: plan.StatusSetup, Errno: int32(syscall.ENOENT)},
			Status{Error: "building the root: entering it: no such file or directory"}},
		{"failed check", []string{"true"}, nil, plan.Status{Kind: plan.StatusSetup, Op: 1, Errno: int32(syscall.ENOTDIR)},
			Status{Error: "building the root: binding /x: /x is not a directory"}},
		{"not on PATH", []string{"no-such-command"}, path, plan.Status{Kind: plan.StatusExec, Op: plan.ExecLookup, Errno: int32(syscall.ENOENT)},
			goLookup("no-such-command", path)},
		{"default PATH", []string{"no-such-command"}, nil, plan.Status{Kind: plan.StatusExec, Op: plan.ExecLookup, Errno: int32(syscall.ENOENT)},
			goLookup("no-such-command", nil)},
		{"no such path", []string{"/no/such/command"}, nil, plan.Status{Kind: plan.StatusExec, Op: plan.ExecLookup, Errno: int32(syscall.ENOENT)},
			goLookup("/no/such/command", nil)},
		{"not executable", []string{notExec}, nil, plan.Status{Kind: plan.StatusExec, Op: plan.ExecLookup, Errno: int32(syscall.ENOEXEC)},
			goLookup(notExec, nil)},
		{"missing interpreter by path", []string{noInterp}, nil, plan.Status{Kind: plan.StatusExec, Op: plan.ExecExecve, Errno: int32(syscall.ENOENT)},
			goStart(noInterp, noInterp)},
		{"missing interpreter on PATH", []string{"nointerp"}, path, plan.Status{Kind: plan.StatusExec, Op: plan.ExecExecve + 1, Errno: int32(syscall.ENOENT)},
			goStart("nointerp", noInterp)},
		{"exec refused", []string{"nointerp"}, path, plan.Status{Kind: plan.StatusExec, Op: plan.ExecExecve + 1, Errno: int32(syscall.EACCES)},
			startFailed("nointerp", &os.PathError{Op: "fork/exec", Path: noInterp, Err: syscall.EACCES})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := FromPlan(p, tc.st, &Config{Command: tc.cmd, Env: tc.env})
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
	if got := FromPlan(p, plan.Status{Kind: plan.StatusRefused, Op: -1}, &Config{Command: []string{"true"}}); !errors.Is(p.Err(plan.Status{Kind: plan.StatusRefused, Op: -1}), plan.ErrRefused) || got.Error == "" {
		t.Errorf("a refused plan gives %+v", got)
	}
}
