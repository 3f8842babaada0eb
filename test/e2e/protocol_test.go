package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// reinstallAdvice is what every report of a mismatched init must say.
const reinstallAdvice = "reinstall warden-init from the same build as warden"

var (
	hostileOnce sync.Once
	hostileBin  string
	hostileErr  error
)

// hostileWarden returns a copy of the warden under test with
// testdata/hostileinit beside it as its warden-init, built once.
func hostileWarden(t *testing.T) string {
	t.Helper()
	requireSandbox(t)
	hostileOnce.Do(func() {
		dir := filepath.Join(filepath.Dir(wardenBin), "hostile")
		if hostileErr = os.Mkdir(dir, 0o755); hostileErr != nil {
			return
		}
		for _, name := range []string{"warden", "warden-server"} {
			b, err := os.ReadFile(filepath.Join(filepath.Dir(wardenBin), name))
			if err != nil {
				hostileErr = err
				return
			}
			if hostileErr = os.WriteFile(filepath.Join(dir, name), b, 0o755); hostileErr != nil {
				return
			}
		}
		bin := filepath.Join(dir, "warden")
		if out, err := goBuild(filepath.Join(dir, "warden-init"), "./testdata/hostileinit", nil); err != nil {
			hostileErr = fmt.Errorf("building testdata/hostileinit: %w\n%s", err, out)
			return
		}
		hostileBin = bin
	})
	if hostileErr != nil {
		t.Fatal(hostileErr)
	}
	return hostileBin
}

// TestHostileBoxKilled runs a server whose init, for one session, breaks
// the protocol after the handshake (the crash: an exited event
// without a status), or falls silent so that an exec's timeout cannot end
// it. That session must be killed and reported dead with the reason, and
// the server and its other session must go on.
func TestHostileBoxKilled(t *testing.T) {
	requirePersistentWorkspaces(t)
	srv := startServerBin(t, nil, hostileWarden(t))
	good := srv.newSession(t, keyA, nil)
	tests := []struct{ mode, exec, want string }{
		{"exited-without-status", `{"command":["true"]}`, "exited event without a status"},
		{"garbage", `{"command":["true"]}`, "invalid character"},
		{"silent", `{"command":["true"],"timeout_seconds":1}`, "end within 5 s of its kill"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			bad := srv.newSession(t, keyA, map[string]any{"env": map[string]string{"WARDEN_TEST_BOX": tt.mode}})
			code, b := srv.call(t, keyA, "POST", sessionPath(bad, "/exec"), strings.NewReader(tt.exec), "application/json")
			if code == http.StatusOK {
				t.Errorf("exec in the hostile box = %d %s, want an error", code, b)
			}
			t.Logf("exec in the hostile box: %d %s", code, b)
			var got sessionState
			dead := waitFor(30*time.Second, func() bool {
				code, b := srv.call(t, keyA, "GET", sessionPath(bad), nil, "")
				return code == http.StatusOK && json.Unmarshal(b, &got) == nil && got.State == "dead"
			})
			if !dead || !strings.Contains(got.Reason, "broke the host protocol") || !strings.Contains(got.Reason, tt.want) {
				t.Errorf("hostile session = %+v, want dead with the broken protocol as its reason: %q", got, tt.want)
			}
			t.Logf("hostile session: %+v", got)
			// A dead session keeps its workspace mounted until deleted.
			if code, b := srv.call(t, keyA, "DELETE", sessionPath(bad), nil, ""); code != http.StatusNoContent {
				t.Errorf("DELETE of the hostile session = %d %s, want 204", code, b)
			}
			srv.healthy(t)
			var r spec.Result
			srv.jsonCall(t, keyA, "POST", sessionPath(good, "/exec"), map[string]any{"command": []string{"sh", "-c", "echo alive"}}, http.StatusOK, &r)
			if r.ExitCode != 0 || r.Stdout != "alive\n" {
				t.Errorf("the other session's exec = exit %d stdout %q, want 0 %q", r.ExitCode, r.Stdout, "alive\n")
			}
		})
	}
}

// TestInitRefusesOtherVersion sends the real warden-init a Config of
// another protocol version, and one with a field it does not know: it
// must build nothing and answer one Refusal that says what to do.
func TestInitRefusesOtherVersion(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name    string
		version uint32
		body    string
		want    string
	}{
		{"newer warden", nsinit.Version + 1, `{}`, fmt.Sprintf("speaks protocol version %d but warden sent version %d: %s", nsinit.Version, nsinit.Version+1, reinstallAdvice)},
		{"older warden", nsinit.Version - 1, `{}`, fmt.Sprintf("speaks protocol version %d but warden sent version %d: %s", nsinit.Version, nsinit.Version-1, reinstallAdvice)},
		{"unknown setting", nsinit.Version, `{"command":["true"],"a_new_security_setting":true}`, `unknown field "a_new_security_setting"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frame := binary.BigEndian.AppendUint32([]byte("WDNC"), tt.version)
			frame = append(binary.BigEndian.AppendUint32(frame, uint32(len(tt.body))), tt.body...)
			line, code := talkToInit(t, frame)
			var r nsinit.Refusal
			if err := json.Unmarshal(line, &r); err != nil || !r.Refused || !strings.Contains(r.Error, tt.want) || !strings.Contains(r.Error, reinstallAdvice) {
				t.Errorf("warden-init answered %q (%v), want a refusal containing %q", line, err, tt.want)
			}
			if code != 112 {
				t.Errorf("warden-init exited %d, want 112", code)
			}
		})
	}
}

// talkToInit starts the warden-init beside the warden under test with
// frame on its control socket and returns its first line and exit code.
func talkToInit(t *testing.T, frame []byte) ([]byte, int) {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	defer host.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(filepath.Dir(wardenBin), "warden-init"))
	cmd.Args[0] = nsinit.Arg0
	cmd.ExtraFiles = []*os.File{box}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	box.Close()
	if _, err := host.Write(frame); err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReaderSize(host, 64<<10).ReadBytes('\n')
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("warden-init: %v, want it to exit with a code", err)
	}
	return line, ee.ExitCode()
}

// TestMismatchedInitReported: whether warden-init is newer (it refuses)
// or from before versioning (it exits 111 unread), warden run and session
// create report it with the advice, not as a sandbox that just ended.
func TestMismatchedInitReported(t *testing.T) {
	bin := hostileWarden(t)
	tests := []struct{ mode, want string }{
		{"refuse", "warden-init refused the sandbox: warden-init speaks protocol version"},
		{"unversioned", "(exit status 111): warden-init could not read its configuration"},
	}
	srv := startServerBin(t, nil, bin)
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, "run", "--env", "WARDEN_TEST_BOX="+tt.mode, "--", "true")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), tt.want) || !strings.Contains(string(out), reinstallAdvice) {
				t.Errorf("warden run = %v, %q, want exit 125 saying %q and %q", err, out, tt.want, reinstallAdvice)
			}
			body := strings.NewReader(`{"env":{"WARDEN_TEST_BOX":"` + tt.mode + `"}}`)
			code, b := srv.call(t, keyA, "POST", "/v1/sessions", body, "application/json")
			if code == http.StatusCreated || !strings.Contains(string(b), tt.want) || !strings.Contains(string(b), reinstallAdvice) {
				t.Errorf("session create = %d %s, want an error saying %q and %q", code, b, tt.want, reinstallAdvice)
			}
		})
	}
}

// TestHostileInitOutsideBox: the hostile init, started outside a box (not
// PID 1), refuses to act out its mode rather than mount over /tmp. It
// runs in a mount namespace of its own all the same, so that a broken
// hostileinit harms nothing.
func TestHostileInitOutsideBox(t *testing.T) {
	bin := filepath.Join(filepath.Dir(hostileWarden(t)), "warden-init")
	body := `{"session":true,"env":["WARDEN_TEST_BOX=garbage"]}`
	frame := binary.BigEndian.AppendUint32([]byte("WDNC"), nsinit.Version)
	frame = append(binary.BigEndian.AppendUint32(frame, uint32(len(body))), body...)
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	host, box := os.NewFile(uintptr(fds[0]), "host"), os.NewFile(uintptr(fds[1]), "box")
	defer host.Close()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Args[0] = nsinit.Arg0
	cmd.ExtraFiles = []*os.File{box}
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	box.Close()
	if _, err := host.Write(frame); err != nil {
		t.Fatal(err)
	}
	// Whatever it does, it gets no spawn request.
	host.Close()
	err = cmd.Wait()
	if err == nil || !strings.Contains(stderr.String(), "refusing to build a fake root as pid") {
		t.Errorf("hostileinit outside a box: %v, stderr %q, want it to refuse", err, stderr.String())
	}
}

// TestOldInitFoundAtStart: beside a warden-init from before protocol
// versioning (here a script that exits 111, as one does for any Config),
// a runtime backend, which cannot see how its box's init ended, finds it
// by the version probe before building the box: warden warns and binds
// itself in as the init, so the run succeeds.
func TestOldInitFoundAtStart(t *testing.T) {
	requireBackend(t, "gvisor")
	dir := filepath.Join(t.TempDir(), "old")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(wardenBin)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "warden")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, nsinit.InitName), []byte("#!/bin/sh\nexit 111\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "run", "--backend", "gvisor", "--", "echo", "ran").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ran\n") || !strings.Contains(string(out), "not using the warden-init beside warden") || !strings.Contains(string(out), reinstallAdvice) {
		t.Errorf("warden run --backend gvisor beside an old warden-init = %v, %q, want the run to succeed with a warning and %q", err, out, reinstallAdvice)
	}
}

// TestHostileStatusReported: a one-shot init that answers with no status
// or with bytes that are not JSON makes warden run fail with the broken
// protocol as the reason, not run on or report an exit code of its own.
func TestHostileStatusReported(t *testing.T) {
	bin := hostileWarden(t)
	tests := []struct{ mode, want string }{
		{"exited-without-status", "broke the host protocol: status: EOF"},
		{"garbage", "broke the host protocol: status: invalid character"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
			defer cancel()
			out, err := exec.CommandContext(ctx, bin, "run", "--env", "WARDEN_TEST_BOX="+tt.mode, "--", "true").CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 125 || !strings.Contains(string(out), tt.want) {
				t.Errorf("warden run = %v, %q, want exit 125 saying %q", err, out, tt.want)
			}
		})
	}
}
