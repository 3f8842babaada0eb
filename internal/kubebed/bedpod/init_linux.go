package bedpod

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// probeWait bounds the native sandbox Init tries before using it.
const probeWait = 2 * time.Minute

// Init is a PodCommand running Warden's init in pod mode as the program
// of a native Warden sandbox (`warden run`, every isolation layer on:
// its namespaces, a network namespace with only lo, seccomp,
// no_new_privs, no capabilities, rlimits, cgroups, the host's root
// read-only), given a listening unix stream socket as its stdin, to
// which the kubelet relays each connection to the Pod's address in the
// host's network namespace (`--stdin-listener`, `warden-init pod
// --listen-fd 0 --addr ADDR --in-warden-sandbox`): issue 23's "itself in
// a native Warden sandbox", with no socket of the host's network in it.
// Its sessions run as InitUID, the sandbox's uid, not the template's
// 65532. Each Pod's /workspace is a directory of its own, owned by
// PodUID, holding a read-only link to warden-init. It builds warden and
// warden-init once under t's temporary directory and tries one sandbox;
// without root or a working native sandbox it skips t (fails it under
// WARDEN_CI=1): there is no fallback to a weaker box.
func Init(t testing.TB) kubebed.PodCommand {
	t.Helper()
	testhost.RequireRoot(t)
	cmd, err := nativeInit(t.TempDir())
	if err != nil {
		testhost.SkipOrFail(t, "no native Warden sandbox for the Pods' inits: "+err.Error())
	}
	return cmd
}

// nativeInit is Init's PodCommand, its binaries built into dir.
func nativeInit(dir string) (kubebed.PodCommand, error) {
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		return nil, fmt.Errorf("making the binaries' directory: %w", err)
	}
	initBin, err := testhost.BuildInit(bin)
	if err != nil {
		return nil, err
	}
	warden, err := buildWarden(bin)
	if err != nil {
		return nil, err
	}
	if err := probeNative(warden); err != nil {
		return nil, err
	}
	pods := filepath.Join(dir, "pods")
	return func(pod *corev1.Pod, addr netip.AddrPort) kubebed.PodProcess {
		ws, err := podWorkspace(filepath.Join(pods, podDir(pod)), initBin)
		if err != nil {
			return kubebed.PodProcess{Err: err}
		}
		return kubebed.PodProcess{Path: warden, Args: nativeArgs(ws, addr), ListenerStdin: true, Ready: podinit.ListeningLine(addr.String())}
	}, nil
}

// maxPodOpenFiles is the Pod-wide cap on open files in its box: finite
// (not warden's own raised limit), and far above what a Pod's sessions
// need (1024 each by default); the agent sets each session's lower
// limit from its Config.
const maxPodOpenFiles = 16384

// podOpenFiles is maxPodOpenFiles, or the hard RLIMIT_NOFILE warden will
// start with if lower, which no sandbox can exceed.
func podOpenFiles() string {
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err == nil && rl.Max < maxPodOpenFiles {
		return strconv.FormatUint(rl.Max, 10)
	}
	return strconv.Itoa(maxPodOpenFiles)
}

// nativeArgs are warden's arguments for a Pod whose workspace is ws and
// whose address, which the kubelet relays into the box and routers'
// proofs sign, is addr. The limits are the Pod's as a whole, like a
// container's: none on wall time (a Pod lives until deleted), CPU time
// or file size, which the Pod's agent sets for each session from its
// router's Config, and may only lower; open files capped Pod-wide
// (podOpenFiles); memory and processes bounded by the box's cgroups.
// --net none: the relayed unix listener is the box's only way in.
// --executor go: the Pod's init runs under Warden's Go init (nsinit.Arg0)
// whatever else is built beside warden, as TestBoxedPod checks.
func nativeArgs(ws string, addr netip.AddrPort) []string {
	return []string{"run", "--stdin-listener", "--executor", "go", "--timeout", "0", "--cpu-time", "0", "--file-size", "0",
		"--open-files", podOpenFiles(), "--net", "none", "--memory", "1GiB", "--pids", "1024", "--workspace", ws,
		"--", "/workspace/warden-init", "pod", "--listen-fd", "0", "--addr", addr.String(), "--in-warden-sandbox"}
}

// podWorkspace makes dir, owned by PodUID, with a link to initBin in it:
// root's file, which the sandbox can run but not change.
func podWorkspace(dir, initBin string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("making the Pod's workspace: %w", err)
	}
	if err := os.Chown(dir, PodUID, PodUID); err != nil {
		return "", fmt.Errorf("giving the Pod's workspace to uid %d: %w", PodUID, err)
	}
	if err := os.Link(initBin, filepath.Join(dir, "warden-init")); err != nil && !os.IsExist(err) {
		return "", fmt.Errorf("linking warden-init into the Pod's workspace: %w", err)
	}
	return dir, nil
}

// buildWarden builds warden alone into dir, with make build's flags for
// bin/warden (slim, no cgo); not warden-exec, which --executor go does
// not need.
func buildWarden(dir string) (string, error) {
	bin := filepath.Join(dir, "warden")
	cmd := exec.Command("go", "build", "-tags", "slim", "-o", bin, "github.com/warden-sandbox/warden/cmd/warden")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building warden: %w: %s", err, out)
	}
	return bin, nil
}

// probeNative runs one native sandbox with warden, bounded by probeWait.
func probeNative(warden string) error {
	ctx, cancel := context.WithTimeout(context.Background(), probeWait)
	defer cancel()
	out, err := exec.CommandContext(ctx, warden, "run", "--timeout", "1m", "--", "true").CombinedOutput()
	if err != nil {
		return fmt.Errorf("a native Warden sandbox failed here (%w): %s", err, out)
	}
	return nil
}

// podDir is the name of pod's own directory under a PodCommand's.
func podDir(pod *corev1.Pod) string {
	return pod.Namespace + "_" + pod.Name + "_" + string(pod.UID)
}
