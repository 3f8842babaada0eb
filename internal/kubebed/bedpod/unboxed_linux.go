package bedpod

import (
	"net/netip"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// Unboxed is a PodCommand running Warden's init in pod mode as each
// Pod's only process, as deploy/'s default template's container would,
// but not in a native Warden sandbox (Init): PID 1
// of its own PID and mount namespaces (unshare's), in a root made of the
// host's /usr and /etc read-only and the template's volumes, as uid and
// gid 65532 with every capability dropped (testhost.PodContainerScript),
// listening on the Pod's address. unshare's --kill-child ends the init
// when the kubelet stops unshare (the init itself ignores SIGTERM, as a
// Pod's PID 1 does). It builds warden-init once, under t's temporary
// directory, and skips t (fails it under WARDEN_CI=1) without root or
// the tools. Its init is in the host's network namespace and runs its
// sessions as PodUID. It is only the baseline of what Init's sandbox
// costs (podclaim's TestBoxingCostOnBed); every other bed Pod of
// Warden's init is Init's.
func Unboxed(t testing.TB) kubebed.PodCommand {
	t.Helper()
	testhost.RequireRoot(t)
	for _, tool := range append([]string{"unshare"}, testhost.PodContainerTools...) {
		testhost.RequireTool(t, tool)
	}
	dir := t.TempDir()
	bin, err := testhost.BuildInit(dir)
	if err != nil {
		t.Fatal(err)
	}
	env := testhost.PodContainerEnv(t)
	return func(pod *corev1.Pod, addr netip.AddrPort) kubebed.PodProcess {
		root := filepath.Join(dir, "pods", podDir(pod))
		args := []string{"--pid", "--mount", "--kill-child", "sh", "-c", testhost.PodContainerScript, "pod", root, bin, addr.String()}
		return kubebed.PodProcess{Path: "unshare", Args: append(args, testhost.DropAllCaps...), Env: env}
	}
}
