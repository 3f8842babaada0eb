package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// newMountNS is PodContainerScript's first line: it exits 1 unless the
// shell runs in a mount namespace other than its caller's (named by
// PodContainerEnv), where the mounts that follow would be the host's.
// It fails closed: no caller's namespace, or none read of its own, is a
// refusal. (The caller's, not PID 1's: /proc/1 may be unreadable, even
// to root, where the tests run.)
const newMountNS = `self=$(readlink /proc/self/ns/mnt) && [ -n "$self" ] && [ -n "$WARDEN_CALLER_MNTNS" ] && [ "$self" != "$WARDEN_CALLER_MNTNS" ] || ` +
	`{ echo "PodContainerScript: not in a mount namespace of its own: run it under unshare --mount (or CLONE_NEWNS) with testhost.PodContainerEnv" >&2; exit 1; }`

// PodContainerEnv is the environment PodContainerScript needs from its
// caller, a test: the caller's mount namespace, which the script
// refuses to mount in.
func PodContainerEnv(t testing.TB) []string {
	t.Helper()
	ns, err := os.Readlink("/proc/self/ns/mnt")
	if err != nil {
		t.Fatalf("reading the test's mount namespace for PodContainerScript: %v", err)
	}
	return []string{"WARDEN_CALLER_MNTNS=" + ns}
}

// PodContainerScript makes a Pod's container, for `sh -c` in a PID and
// mount namespace a test started as root (unshare's, or clone flags): a
// tmpfs root holding the host's /usr and /etc read-only, a few device
// nodes, /proc of the new PID namespace, and tmpfs volumes at
// /workspace, /tmp and /home/sandbox as deploy/'s default template's
// emptyDirs, then it execs warden-init there as PID 1 in pod mode, as uid
// and gid 65532 with the capabilities setpriv's arguments leave it (the
// default template drops them all: DropAllCaps). Its arguments: $0 a
// name, then the root directory (made if missing), warden-init's path,
// the address to listen on, and setpriv's capability arguments. Nothing
// is mounted outside the namespace: / is made private first, and the
// script refuses to run in its caller's mount namespace; its caller
// adds PodContainerEnv to its environment.
const PodContainerScript = "set -e\n" + newMountNS + `
R=$1 INIT=$2 ADDR=$3
shift 3
mount --make-rprivate /
mkdir -p "$R"
mount -t tmpfs -o size=1m,mode=755 pod-root "$R"
cd "$R"
mkdir usr etc proc dev workspace tmp home home/sandbox
ln -s usr/bin bin; ln -s usr/lib lib; ln -s usr/lib64 lib64; ln -s usr/sbin sbin
for d in usr etc; do mount --bind "/$d" "$d"; mount -o remount,bind,ro "$d"; done
for n in null zero full random urandom; do touch "dev/$n"; mount --bind "/dev/$n" "dev/$n"; done
mount -t proc -o nosuid,nodev,noexec proc proc
mount -t tmpfs -o size=16m,uid=65532,gid=65532,mode=755 workspace workspace
mount -t tmpfs -o size=16m,uid=65532,gid=65532,mode=755 home home/sandbox
mount -t tmpfs -o size=16m,mode=1777 tmp tmp
touch warden-init
mount --bind "$INIT" warden-init
mount -o remount,bind,ro warden-init
exec chroot . setpriv --reuid=65532 --regid=65532 --clear-groups "$@" /warden-init pod --listen "$ADDR"
`

// DropAllCaps are setpriv's arguments for a Pod that drops every
// capability, as deploy/'s default template does.
var DropAllCaps = []string{"--inh-caps=-all", "--bounding-set=-all"}

// PodContainerTools are the programs PodContainerScript and BuildInit
// need besides sh, for RequireTool.
var PodContainerTools = []string{"go", "setpriv", "chroot", "mount"}

// BuildInit builds warden-init into dir as make build does (static, so
// that it runs in a root holding only the host's /usr and /etc), and is
// its path.
func BuildInit(dir string) (string, error) {
	bin := filepath.Join(dir, "warden-init")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/warden-sandbox/warden/cmd/warden-init")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building warden-init: %w: %s", err, out)
	}
	return bin, nil
}
