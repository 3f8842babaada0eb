package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// Each test here is something hostile code would try in order to reach the
// host, and asserts the exact outcome that proves it failed. Host-wide
// files are only ever opened, never written, and signals are signal 0.

// checkProbe runs the probe once and compares each named result.
func checkProbe(t *testing.T, args []string, wants map[string]oneOf) {
	t.Helper()
	got := runProbe(t, nil, args...)
	for name, w := range wants {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: probe %s did not report it (stdout %v)", name, args[0], got)
		} else if !w.match(g) {
			t.Errorf("%s: got %s, want %s", name, g, w)
		}
	}
}

// TestEscapeHostSecrets: the host's credentials, keys and identity must
// not exist in the sandbox at all.
func TestEscapeHostSecrets(t *testing.T) {
	absent := []string{
		"/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/sudoers", "/etc/ssh",
		"/etc/machine-id", "/var/lib/dbus/machine-id", "/root", "/root/.ssh",
		"/var/lib", "/var/log",
		// TLS private keys: /etc/ssl is shown for its certificates only.
		"/etc/ssl/private",
	}
	wants := map[string]oneOf{}
	for _, p := range absent {
		wants[p] = oneOf{"errno=ENOENT"}
	}
	checkProbe(t, append([]string{"stat"}, absent...), wants)

	t.Run("/home holds only the sandbox user's home", func(t *testing.T) {
		r := runJSON(t, "--", "ls", "-A", "/home")
		if got, w := strings.TrimSpace(r.Stdout), "sandbox"; r.ExitCode != 0 || got != w {
			t.Errorf("ls -A /home: exit %d, got %q, want %q (stderr %q)", r.ExitCode, got, w, r.Stderr)
		}
	})
	t.Run("/etc/passwd names no host user", func(t *testing.T) {
		r := runJSON(t, "--", "cut", "-d:", "-f1", "/etc/passwd")
		if got, w := strings.Fields(r.Stdout), []string{"root", "sandbox", "nobody"}; r.ExitCode != 0 || strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("users in /etc/passwd: got %q, want %q (stderr %q)", got, w, r.Stderr)
		}
	})
}

// TestEscapeHostEnvironment: nothing of warden's own environment (API keys,
// tokens) reaches the program.
func TestEscapeHostEnvironment(t *testing.T) {
	secret := "warden-e2e-secret-" + strconv.Itoa(os.Getpid())
	t.Setenv("WARDEN_E2E_SECRET", secret)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)

	allowed := map[string]bool{
		"PATH": true, "HOME": true, "USER": true, "LOGNAME": true, "SHELL": true,
		"LANG": true, "TMPDIR": true, "PWD": true, "MPLBACKEND": true,
	}
	got := runProbe(t, nil, "env")
	for _, k := range strings.Split(got["env"], ",") {
		if !allowed[k] {
			t.Errorf("environment variable %q reached the program; want only %v", k, allowed)
		}
	}
	r := runJSON(t, "--", "sh", "-c", "cat /proc/self/environ; env")
	if strings.Contains(r.Stdout, secret) {
		t.Errorf("the host's secret %q is visible in the sandbox: %q", secret, r.Stdout)
	}
}

// TestEscapeHostProcesses: the host's processes can be neither seen nor
// signalled; PID 1 is warden's init, not the host's.
func TestEscapeHostProcesses(t *testing.T) {
	hostPID := os.Getpid()
	if hostPID < 100 {
		// A pid this small could also be one of the sandbox's own.
		testhost.SkipOrFail(t, fmt.Sprintf("the test's pid %d is too small to tell from a sandbox pid", hostPID))
	}
	pid := strconv.Itoa(hostPID)

	t.Run("kill(host pid, 0) is ESRCH", func(t *testing.T) {
		got := runProbe(t, nil, "kill", pid)
		if w := "errno=ESRCH"; got["kill"] != w {
			t.Errorf("kill(%d, 0): got %s, want %s", hostPID, got["kill"], w)
		}
	})
	t.Run("/proc/<host pid> does not exist", func(t *testing.T) {
		p := "/proc/" + pid
		got := runProbe(t, nil, "stat", p)
		if w := "errno=ENOENT"; got[p] != w {
			t.Errorf("stat %s: got %s, want %s", p, got[p], w)
		}
	})
	// PID 1 is the executor, named without its host path: warden-init
	// (the Go init) or warden-exec (the fast one).
	t.Run("/proc/1/cmdline is the executor's name", func(t *testing.T) {
		host, err := os.ReadFile("/proc/1/cmdline")
		if err != nil {
			t.Fatal(err)
		}
		for _, side := range executors(t).sides {
			r := runJSON(t, append(side.flags, "--", "cat", "/proc/1/cmdline")...)
			w := "warden-init\x00"
			if side.name == "fast" {
				w = "warden-exec\x00"
			}
			if r.Stdout != w {
				t.Errorf("--executor %s: /proc/1/cmdline: got %q, want %q", side.name, r.Stdout, w)
			}
			if r.Stdout == string(host) {
				t.Errorf("--executor %s: /proc/1/cmdline inside is the host's init's: %q", side.name, r.Stdout)
			}
			// Its name too, though it is run through a descriptor
			// (/proc/self/fd/N), after which the kernel names it "N".
			c := runJSON(t, append(side.flags, "--", "cat", "/proc/1/comm")...)
			if w := strings.TrimSuffix(w, "\x00") + "\n"; c.Stdout != w {
				t.Errorf("--executor %s: /proc/1/comm: got %q, want %q", side.name, c.Stdout, w)
			}
		}
	})
	t.Run("ps shows only the sandbox", func(t *testing.T) {
		r := runJSON(t, "--", "ps", "-e", "-o", "pid=,args=")
		lines := strings.Split(strings.TrimSpace(r.Stdout), "\n")
		if r.ExitCode != 0 || len(lines) > 3 {
			t.Errorf("ps -e: exit %d, %d processes, want at most 3 (init, ps):\n%s%s", r.ExitCode, len(lines), r.Stdout, r.Stderr)
		}
	})
	t.Run("/proc lists only the sandbox's pids", func(t *testing.T) {
		r := runJSON(t, "--", "ls", "/proc")
		var pids []string
		for _, f := range strings.Fields(r.Stdout) {
			if _, err := strconv.Atoi(f); err == nil {
				pids = append(pids, f)
			}
		}
		if len(pids) == 0 || len(pids) > 3 || pids[0] != "1" {
			t.Errorf("numeric entries in /proc: got %v, want 1 and ls itself (at most 3)", pids)
		}
	})
}

// TestEscapeReadOnlyRoot: everything outside the writable directories is
// read-only, the sandbox's own /etc included.
func TestEscapeReadOnlyRoot(t *testing.T) {
	refused := oneOf{"errno=EROFS"}
	refusedOrDenied := oneOf{"errno=EROFS", "errno=EACCES"}
	create := map[string]oneOf{
		"/escape": refused, "/usr/escape": refused, "/usr/bin/escape": refused,
		"/etc/escape": refused, "/dev/escape": refused, "/var/escape": refused,
		"/home/escape": refused, "/run/escape": refused,
		// Writable: the workspace, /tmp (and /var/tmp into it), home, shm.
		"/workspace/ok": {"ok"}, "/tmp/ok": {"ok"}, "/var/tmp/ok": {"ok"},
		"/home/sandbox/ok": {"ok"}, "/dev/shm/ok": {"ok"},
	}
	t.Run("create", func(t *testing.T) {
		args := []string{"create"}
		for p := range create {
			args = append(args, p)
		}
		checkProbe(t, args, create)
	})
	// /etc's files belong to the host (nobody here), so permission may
	// refuse before the read-only mount does; creating /etc/escape above
	// shows the mount is read-only.
	openw := map[string]oneOf{
		"/etc/passwd": refusedOrDenied, "/etc/hosts": refusedOrDenied, "/etc/resolv.conf": refusedOrDenied,
		"/etc/ld.so.cache": refusedOrDenied, "/usr/bin/sh": refusedOrDenied,
		"/usr/lib/os-release": refusedOrDenied,
	}
	t.Run("open for writing", func(t *testing.T) {
		args := []string{"openw"}
		for p := range openw {
			args = append(args, p)
		}
		checkProbe(t, args, openw)
	})
}

// TestEscapePrivilegeGain: set-uid binaries, mount and new namespaces give
// the program neither root nor capabilities.
func TestEscapePrivilegeGain(t *testing.T) {
	tests := []struct {
		name   string
		script string
		// check gets the combined output and exit code.
		check func(t *testing.T, out string, code int)
	}{
		{"su to root", "su -c id root </dev/null", func(t *testing.T, out string, code int) {
			if code == 0 || strings.Contains(out, "uid=0") {
				t.Errorf("su -c id root: exit %d, output %q; want failure without uid=0", code, out)
			}
		}},
		{"mount -t tmpfs", "mount -t tmpfs none /tmp; echo rc=$?; grep -c ' /tmp tmpfs' /proc/self/mounts", func(t *testing.T, out string, code int) {
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if strings.Contains(out, "rc=0") || lines[len(lines)-1] != "1" {
				t.Errorf("mount -t tmpfs none /tmp: output %q; want failure and still one mount on /tmp", out)
			}
		}},
		{"unshare -U", "unshare -U id", func(t *testing.T, out string, code int) {
			if code == 0 || !strings.Contains(out, "Operation not permitted") {
				t.Errorf("unshare -U: exit %d, output %q; want failure with EPERM", code, out)
			}
		}},
		{"unshare -r (map root)", "unshare -r id -u", func(t *testing.T, out string, code int) {
			if code == 0 || strings.Contains(out, "\n0\n") || strings.TrimSpace(out) == "0" {
				t.Errorf("unshare -r: exit %d, output %q; want failure", code, out)
			}
		}},
		{"python setuid(0)", "python3 -c 'import os; os.setuid(0)' 2>&1; id -u", func(t *testing.T, out string, code int) {
			if !strings.HasSuffix(strings.TrimSpace(out), "1000") || !strings.Contains(out, "Error") {
				t.Errorf("setuid(0): output %q; want an error and uid 1000", out)
			}
		}},
	}
	requireSandbox(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := sh(t, tt.script+" 2>&1")
			if r.Error != "" {
				t.Fatalf("warden failed: %s", r.Error)
			}
			tt.check(t, r.Stdout, r.ExitCode)
		})
	}

	t.Run("ids of the program", func(t *testing.T) {
		got := runProbe(t, nil, "ids")
		if got["uid"] != "1000,1000,1000" || got["gid"] != "1000,1000,1000" {
			t.Errorf("uid %s gid %s, want 1000,1000,1000 for both", got["uid"], got["gid"])
		}
	})
	t.Run("set-uid bits ignored on /usr and /workspace", func(t *testing.T) {
		for _, p := range []string{"/usr", "/workspace"} {
			got := runProbe(t, nil, "statfs", p)
			if !strings.Contains(got["statfs"], "nosuid") {
				t.Errorf("%s mount flags %q, want nosuid", p, got["statfs"])
			}
		}
	})
}

// TestEscapeSetIDInWorkspace: the workspace is a host directory, and files
// the sandbox makes there land on disk owned by the directory's owner
// (an ordinary user here; Warden refuses root-owned workspaces). A set-uid
// bit or file capability planted there would be a privileged binary of
// that user on the host. The workspace is the test's
// own, under a 0700 directory, so nothing planted is reachable by others.
func TestEscapeSetIDInWorkspace(t *testing.T) {
	requireSandbox(t)
	ws := probeTestWorkspace(t)
	probeIn(t, ws)
	// A set-uid file of the workspace's owner, left by the host: writing it
	// from the sandbox must clear the bit, or the sandbox would choose the
	// code of a set-uid binary.
	victim := filepath.Join(ws, "victim")
	if err := os.WriteFile(victim, []byte("data\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(victim, workspaceOwner, workspaceOwner); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(victim, 0o755|os.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(victim); err != nil || fi.Mode()&os.ModeSetuid == 0 {
		t.Fatalf("planting the set-uid victim: %v, %v", fi, err)
	}
	defer os.Remove(victim)
	script := `cd /workspace
cp probe planted
./probe chmod 4755 planted
./probe chmod 2755 planted
./probe creatmode 4755 created
./probe setcap planted
echo x >> victim && echo append=ok`
	r := runJSON(t, "--workspace", ws, "--", "sh", "-c", script)
	if r.Error != "" {
		t.Fatalf("warden failed: %s", r.Error)
	}
	lines := map[string][]string{}
	for _, l := range strings.Split(strings.TrimSpace(r.Stdout), "\n") {
		k, v, _ := strings.Cut(l, "=")
		lines[k] = append(lines[k], v)
	}
	wants := map[string]string{"chmod": "errno=EPERM,errno=EPERM", "creatmode": "errno=EPERM", "setcap": "errno=EPERM", "append": "ok"}
	for k, w := range wants {
		if got := strings.Join(lines[k], ","); got != w {
			t.Errorf("%s: got %q, want %q (stdout %q, stderr %q)", k, got, w, r.Stdout, r.Stderr)
		}
	}
	for _, name := range []string{"planted", "created", "victim"} {
		p := filepath.Join(ws, name)
		fi, err := os.Lstat(p)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode(); m&(os.ModeSetuid|os.ModeSetgid) != 0 {
			t.Errorf("host file %s has mode %v: a set-id file planted from the sandbox", name, m)
		}
		if _, err := unix.Lgetxattr(p, "security.capability", make([]byte, 64)); !errors.Is(err, unix.ENODATA) {
			t.Errorf("host file %s: security.capability xattr: got %v, want ENODATA", name, err)
		}
	}
}

// TestEscapeKernelInterfaces: host-wide kernel knobs cannot be opened for
// writing (only opened: nothing is ever written), /sys is not there, and
// the /proc files that leak kernel state read empty.
func TestEscapeKernelInterfaces(t *testing.T) {
	// A masked file is /dev/null (char 1:3) bound over it: opening it
	// reaches nothing. A path the host kernel lacks is absent.
	openw := map[string]oneOf{
		"/proc/sysrq-trigger":               {"errno=ENOENT", "errno=EACCES", "errno=EROFS", "errno=EPERM", "ok chr=1:3"},
		"/proc/sys/kernel/hostname":         {"errno=EACCES", "errno=EROFS"},
		"/proc/sys/vm/drop_caches":          {"errno=EACCES", "errno=EROFS"},
		"/proc/sys/kernel/core_pattern":     {"errno=EACCES", "errno=EROFS"},
		"/proc/sys/kernel/modprobe":         {"errno=EACCES", "errno=EROFS", "errno=ENOENT"},
		"/proc/sys/fs/binfmt_misc/register": {"errno=EACCES", "errno=EROFS", "errno=ENOENT"},
		"/proc/1/mem":                       {"errno=EACCES", "errno=EPERM"},
	}
	t.Run("open for writing", func(t *testing.T) {
		args := []string{"openw"}
		for p := range openw {
			args = append(args, p)
		}
		checkProbe(t, args, openw)
	})

	empty := oneOf{"errno=ENOENT", "ok len=0"}
	read := map[string]oneOf{
		"/proc/kcore": empty, "/proc/keys": empty, "/proc/timer_list": empty,
		"/proc/kallsyms": empty, "/proc/sched_debug": empty, "/proc/key-users": empty,
	}
	t.Run("masked /proc files read empty", func(t *testing.T) {
		args := []string{"read"}
		for p := range read {
			args = append(args, p)
		}
		checkProbe(t, args, read)
	})

	t.Run("/sys holds only the sandbox's CPUs", func(t *testing.T) {
		r := sh(t, "find /sys | sort | tr '\\n' ' '", "--cpus", "1")
		want := "/sys /sys/devices /sys/devices/system /sys/devices/system/cpu /sys/devices/system/cpu/cpu0 " +
			"/sys/devices/system/cpu/online /sys/devices/system/cpu/possible /sys/devices/system/cpu/present"
		if got := strings.TrimSpace(r.Stdout); got != want {
			t.Errorf("entries in /sys: got %q, want %q", got, want)
		}
	})
}

// fdsProbe prints the process's open descriptors below 4096, comma-separated.
const fdsProbe = `
import os
def open_(fd):
    try:
        os.fstat(fd)
        return True
    except OSError:
        return False
print(",".join(str(fd) for fd in range(4096) if open_(fd)))`

// TestEscapeDescriptorsAndTerminal: the program inherits no descriptor of
// warden's beyond stdio, has no controlling terminal, and cannot push input
// into one.
func TestEscapeDescriptorsAndTerminal(t *testing.T) {
	t.Run("only fds 0, 1, 2", func(t *testing.T) {
		got := runProbe(t, nil, "fds")
		if w := "0,1,2"; got["fds"] != w {
			t.Errorf("open descriptors: got %s, want %s", got["fds"], w)
		}
	})
	// On gVisor the user's processes are forked by the user's agent, which
	// got the host's control connection as an inherited descriptor: none
	// may reach them. No host workspace there, so the probe is fstat's, which
	// opens none itself.
	for _, b := range []string{"native", "gvisor", "microvm"} {
		t.Run("only fds 0, 1, 2 of a process/"+b, func(t *testing.T) {
			requireBackend(t, b)
			r := sh(t, "exec python3 -c '"+fdsProbe+"'", "--backend", b)
			if got, w := strings.TrimSpace(r.Stdout), "0,1,2"; r.ExitCode != 0 || got != w {
				t.Errorf("open descriptors on %s: got %q (exit %d, stderr %q), want %s", b, got, r.ExitCode, r.Stderr, w)
			}
		})
	}
	t.Run("no controlling terminal", func(t *testing.T) {
		got := runProbe(t, nil, "tty")
		if w := (oneOf{"errno=ENOENT", "errno=ENXIO"}); !w.match(got["devtty"]) {
			t.Errorf("open /dev/tty: got %s, want %s", got["devtty"], w)
		}
		if got["tty_nr"] != "0" {
			t.Errorf("tty_nr in /proc/self/stat: got %s, want 0", got["tty_nr"])
		}
	})
	t.Run("TIOCSTI on stdin", func(t *testing.T) {
		got := runProbe(t, nil, "tiocsti")
		if w := "errno=EPERM"; got["tiocsti"] != w {
			t.Errorf("ioctl(0, TIOCSTI): got %s, want %s", got["tiocsti"], w)
		}
	})
}

// TestEscapeThroughInit: /proc/1 is warden's init, which holds the host's
// side of the sandbox (its root before pivot, its descriptors): its root,
// memory and environment must be out of reach, and /proc/self/root is the
// sandbox's own root.
func TestEscapeThroughInit(t *testing.T) {
	denied := oneOf{"errno=EACCES", "errno=EPERM"}
	t.Run("read", func(t *testing.T) {
		checkProbe(t, []string{"read", "/proc/1/root/etc/shadow", "/proc/1/root/etc/hostname", "/proc/1/mem", "/proc/1/environ", "/proc/self/root/etc/shadow", "/proc/1/cwd/etc/shadow"},
			map[string]oneOf{
				"/proc/1/root/etc/shadow":    denied,
				"/proc/1/root/etc/hostname":  denied,
				"/proc/1/mem":                denied,
				"/proc/1/environ":            denied,
				"/proc/self/root/etc/shadow": {"errno=ENOENT"},
				"/proc/1/cwd/etc/shadow":     denied,
			})
	})
	t.Run("readlink", func(t *testing.T) {
		checkProbe(t, []string{"readlink", "/proc/1/root", "/proc/1/cwd", "/proc/1/exe", "/proc/1/fd/3", "/proc/self/root"},
			map[string]oneOf{
				"/proc/1/root":    denied,
				"/proc/1/cwd":     denied,
				"/proc/1/exe":     denied,
				"/proc/1/fd/3":    denied,
				"/proc/self/root": {"ok /"},
			})
	})
}

// TestEscapeWorkspaceSymlinks: links planted in the workspace (by an
// earlier run, or by the sandbox itself) resolve inside the sandbox's own
// root, which has no shadow file.
func TestEscapeWorkspaceSymlinks(t *testing.T) {
	requireSandbox(t)
	ws := probeTestWorkspace(t)
	probeIn(t, ws)
	links := map[string]string{
		"abs":      "/etc/shadow",
		"rel":      "../../../../../../etc/shadow",
		"initroot": "/proc/1/root/etc/shadow",
		"hostroot": "/proc/self/root/etc/shadow",
	}
	for name, target := range links {
		if err := os.Symlink(target, filepath.Join(ws, name)); err != nil {
			t.Fatal(err)
		}
	}
	script := `ln -s /etc/shadow /tmp/inside && ln -s /etc/shadow /workspace/inside && /workspace/probe read /workspace/abs /workspace/rel /workspace/initroot /workspace/hostroot /tmp/inside /workspace/inside`
	r := runJSON(t, "--workspace", ws, "--", "sh", "-c", script)
	if r.Error != "" {
		t.Fatalf("warden failed: %s", r.Error)
	}
	got := probeLines(t, r)
	wants := map[string]oneOf{
		"/workspace/abs":      {"errno=ENOENT"},
		"/workspace/rel":      {"errno=ENOENT"},
		"/workspace/initroot": {"errno=EACCES", "errno=EPERM"},
		"/workspace/hostroot": {"errno=ENOENT"},
		"/tmp/inside":         {"errno=ENOENT"},
		"/workspace/inside":   {"errno=ENOENT"},
	}
	for p, w := range wants {
		if !w.match(got[p]) {
			t.Errorf("read %s: got %s, want %s", p, got[p], w)
		}
	}
}

// deviceTimesScript writes to each device node and tries to set its
// times: the node's inode is shared with every other sandbox (and the
// host, rootless), so a time it could set would be a channel to them. It
// only asks for the current time (what write permission alone allows),
// never a chosen one, so a sandbox that wrongly may do so leaves nothing
// stranger than a fresh time behind.
const deviceTimesScript = `for d in null zero full random urandom; do
	echo x > /dev/$d 2>/dev/null && echo "$d write=ok"
	touch /dev/$d 2>/dev/null && echo "$d touch=ok"
done; true`

// TestEscapeDeviceTimes checks that the sandbox can write to its device
// nodes but not change their times, as root and rootless.
func TestEscapeDeviceTimes(t *testing.T) {
	requireSandbox(t)
	want := "null write=ok\nzero write=ok\nrandom write=ok\nurandom write=ok\n" // full: ENOSPC
	t.Run("root", func(t *testing.T) {
		r := runJSON(t, "--", "sh", "-c", deviceTimesScript)
		if r.Error != "" || r.Stdout != want {
			t.Errorf("got %q (error %q), want %q", r.Stdout, r.Error, want)
		}
	})
	t.Run("rootless", func(t *testing.T) {
		r := runRootless(t, asNobody(t), append(rootlessFlags, "--", "sh", "-c", deviceTimesScript)...)
		if r.Stdout != want {
			t.Errorf("got %q, want %q", r.Stdout, want)
		}
	})
}
