package kubebed_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/poddial"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// boxedInitArgs is how a boxed Pod's init is started (bedpod.Init), with
// the Pod's address, which the test finds it by among the host's
// processes.
const boxedInitArgs = "/workspace/warden-init\x00pod\x00--listen-fd\x000\x00--addr\x00%s\x00--in-warden-sandbox\x00"

// TestBoxedPod runs a Pod whose init is in a native Warden sandbox
// (bedpod.Init) and checks, from the host, that the init is
// boxed: no_new_privs, a seccomp filter, no capability, not root, a
// network namespace other than the host's, a cgroup of Warden's, no
// socket of the host's TCP in it or its PID 1, a listening unix
// socket of the host's (the relayed one) in it and none in its PID 1; and, through a router's session on the Pod's address (relayed
// by the kubelet), that it serves the agent there, whose processes see
// lo and no other network interface.
func TestBoxedPod(t *testing.T) {
	bed := kubebed.Start(t, bedpod.Init(t))
	ctx, cancel := context.WithTimeout(context.Background(), bedpod.WaitLong)
	defer cancel()
	pod := runBoxedPod(ctx, t, bed)
	ap := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(podinit.Port))
	initDir := findBoxedInit(t, fmt.Sprintf(boxedInitArgs, ap))
	checkBoxedFromHost(t, initDir)
	checkNoHostTCP(t, initDir, "/proc/"+statusField(initDir, "PPid"))
	s := attachBoxed(ctx, t, pod)
	r, err := s.Exec(ctx, agent.ExecSpec{Command: []string{"sh", "-c", "id -u; echo ifs=$(sed -n '3,$s/:.*//p' /proc/net/dev | tr -d ' ' | tr '\\n' ,); tr '\\0' ' ' < /proc/1/cmdline"}}, agent.IO{})
	if err != nil {
		t.Fatalf("exec in the boxed Pod: %v; its log: %s", err, bed.Log("pods/default_boxed"))
	}
	lines := strings.SplitN(r.Stdout, "\n", 3)
	want := []string{strconv.Itoa(bedpod.InitUID), "ifs=lo,"}
	if r.ExitCode != 0 || len(lines) != 3 || lines[0] != want[0] || lines[1] != want[1] || !strings.HasPrefix(lines[2], nsinit.Arg0+" ") {
		t.Errorf("exec's uid, interfaces and PID 1: got %q (exit %d, stderr %q), want lines %q then PID 1 %s", r.Stdout, r.ExitCode, r.Stderr, want, nsinit.Arg0)
	}
}

// runBoxedPod creates a Pod declaring the init's port and waits for it
// to run.
func runBoxedPod(ctx context.Context, t *testing.T, bed *kubebed.Bed) *corev1.Pod {
	t.Helper()
	pods := bed.Clientset.CoreV1().Pods("default")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "boxed", Namespace: "default"},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			AutomountServiceAccountToken: new(false),
			Containers: []corev1.Container{{
				Name: "sandbox", Image: "warden.invalid/sandbox",
				Ports: []corev1.ContainerPort{{ContainerPort: podinit.Port}},
			}},
		},
	}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Pod %s: %v", pod.Name, err)
	}
	var got *corev1.Pod
	bedpod.WaitFor(t, "the boxed Pod to run", func() bool {
		var err error
		got, err = pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return err == nil && (got.Status.Phase == corev1.PodRunning || got.Status.Phase == corev1.PodFailed)
	})
	if got.Status.Phase != corev1.PodRunning {
		t.Fatalf("the boxed Pod: %s, %s; its log: %s", got.Status.Phase, got.Status.Message, bed.Log("pods/default_boxed"))
	}
	return got
}

// attachBoxed dials pod's init as a router, on the Pod's address, and
// attaches a session, closed at the test's end.
func attachBoxed(ctx context.Context, t *testing.T, pod *corev1.Pod) *agent.Session {
	t.Helper()
	routerKey := bytes.Repeat([]byte{0x5a}, podinit.MinRouterKey)
	key, err := podinit.Key(routerKey, string(pod.UID))
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(podinit.Port))
	conn, a, err := poddial.Dial(ctx, addr, key)
	if err != nil || a != podinit.Adopted {
		t.Fatalf("dialing the boxed Pod at %s: %v, %v; want %v", addr, a, err, podinit.Adopted)
	}
	s, err := poddial.Attach(ctx, conn, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, slog.Default())
	if err != nil {
		t.Fatalf("attaching a session to the boxed Pod: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("closing the session: %v", err)
		}
	})
	return s
}

// findBoxedInit is the host's /proc directory of the boxed Pod's init:
// the process started with args below this test's process.
func findBoxedInit(t *testing.T, args string) string {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && string(b) == args && descendsFromTest(d) {
			return d
		}
	}
	t.Fatalf("no process %q below the test's (pid %d)", args, os.Getpid())
	return ""
}

// descendsFromTest says the process at /proc dir has this test's
// process among its ancestors, following at most 16 parents.
func descendsFromTest(dir string) bool {
	for range 16 {
		ppid := statusField(dir, "PPid")
		if ppid == strconv.Itoa(os.Getpid()) {
			return true
		}
		if ppid == "" || ppid == "0" || ppid == "1" {
			return false
		}
		dir = "/proc/" + ppid
	}
	return false
}

// statusField is field's value in dir/status, or "".
func statusField(dir, field string) string {
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// checkBoxedFromHost checks the init at /proc dir is in a native Warden
// sandbox, as the host sees it.
func checkBoxedFromHost(t *testing.T, dir string) {
	t.Helper()
	for _, c := range []struct{ field, want string }{
		{"NoNewPrivs", "1"}, {"Seccomp", "2"}, {"CapEff", "0000000000000000"}, {"CapBnd", "0000000000000000"},
	} {
		if got := statusField(dir, c.field); got != c.want {
			t.Errorf("the boxed init's %s: got %q, want %q", c.field, got, c.want)
		}
	}
	if uid := strings.Fields(statusField(dir, "Uid")); len(uid) == 0 || uid[0] == "0" {
		t.Errorf("the boxed init's uids on the host: got %v, want not root", uid)
	}
	own, err := os.Readlink("/proc/self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(dir, "ns/net")); err != nil || got == own {
		t.Errorf("the boxed init's network namespace: got %q, %v; want one other than the host's %q", got, err, own)
	}
	cg, err := os.ReadFile(filepath.Join(dir, "cgroup"))
	if err != nil || !strings.Contains(string(cg), "/warden/") {
		t.Errorf("the boxed init's cgroups: got %q, %v; want Warden's (under /warden/)", cg, err)
	}
}

// checkNoHostTCP checks that none of the processes at the /proc dirs
// (the boxed init and its PID 1) holds a TCP socket of the host's
// network namespace, and that the init holds a listening unix socket of
// the host's (the kubelet's relayed listener, which it took from its
// stdin) and its PID 1 none (the Go init drops its copy): the host's /proc/net lists its sockets by inode, and
// /proc/PID/fd links name theirs.
func checkNoHostTCP(t *testing.T, dirs ...string) {
	t.Helper()
	tcp := socketInodes(t, "/proc/self/net/tcp", "/proc/self/net/tcp6")
	listening := unixListeners(t)
	found := false
	for i, d := range dirs {
		fds, err := filepath.Glob(filepath.Join(d, "fd", "*"))
		if err != nil || len(fds) == 0 {
			t.Fatalf("listing %s's descriptors: %v (%d)", d, err, len(fds))
		}
		for _, fd := range fds {
			link, err := os.Readlink(fd)
			ino, ok := strings.CutPrefix(link, "socket:[")
			ino = strings.TrimSuffix(ino, "]")
			if err != nil || !ok {
				continue
			}
			if tcp[ino] {
				t.Errorf("%s is %s, a TCP socket of the host's network namespace", fd, link)
			}
			if i > 0 && listening[ino] {
				t.Errorf("%s is %s, a listening unix socket of the host's: the box's PID 1 keeps a copy of the relayed listener", fd, link)
			}
			found = found || (i == 0 && listening[ino])
		}
	}
	if !found {
		t.Errorf("the boxed init (%s) holds no listening unix socket of the host's network namespace, want the relayed listener", dirs[0])
	}
}

// socketInodes are the inodes of the sockets the /proc/net tables of
// TCP list (the 10th field).
func socketInodes(t *testing.T, tables ...string) map[string]bool {
	t.Helper()
	inodes := map[string]bool{}
	for _, table := range tables {
		for _, f := range tableRows(t, table) {
			if len(f) > 9 {
				inodes[f[9]] = true
			}
		}
	}
	return inodes
}

// unixListeners are the inodes of the host's listening unix sockets:
// /proc/net/unix's rows whose Flags (4th field) have __SO_ACCEPTCON.
func unixListeners(t *testing.T) map[string]bool {
	t.Helper()
	inodes := map[string]bool{}
	for _, f := range tableRows(t, "/proc/self/net/unix") {
		if len(f) > 6 && f[3] == "00010000" {
			inodes[f[6]] = true
		}
	}
	return inodes
}

// tableRows are the fields of a /proc/net table's rows, its header left
// out.
func tableRows(t *testing.T, table string) [][]string {
	t.Helper()
	b, err := os.ReadFile(table)
	if err != nil {
		t.Fatalf("reading %s: %v", table, err)
	}
	var rows [][]string
	for i, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if i > 0 {
			rows = append(rows, strings.Fields(line))
		}
	}
	return rows
}
