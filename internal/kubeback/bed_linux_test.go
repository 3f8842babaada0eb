package kubeback_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubeback"
	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

const (
	// ns and pool are deploy/'s sandbox namespace and default warm pool.
	ns   = kubebed.SandboxNamespace
	pool = "default"
	// owner is the tenant of the tests' sessions.
	owner = "acme"
	// waitLong bounds each wait on the controller or kubelet.
	waitLong = bedpod.WaitLong
)

// routerKey is the tests' router key, shared by their replicas.
var routerKey = bytes.Repeat([]byte{0x6b}, podinit.MinRouterKey)

// install installs Warden's side (kubebed.InstallWarden) and waits for
// the warm pool to fill.
func install(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	t.Helper()
	if err := bed.InstallWarden(ctx); err != nil {
		t.Fatal(err)
	}
	waitPool(ctx, t, bed, 4)
}

// waitPool waits until the warm pool has n ready sandboxes.
func waitPool(ctx context.Context, t *testing.T, bed *kubebed.Bed, n int32) {
	t.Helper()
	bedpod.WaitFor(t, fmt.Sprintf("the warm pool to hold %d ready sandboxes", n), func() bool {
		var wp extv1.SandboxWarmPool
		err := bed.Extensions.Get().Namespace(ns).Resource("sandboxwarmpools").Name(pool).Do(ctx).Into(&wp)
		return err == nil && wp.Status.ReadyReplicas >= n
	})
}

// replica is one router replica: the backend with the router's service
// account's rights, and its Manager.
func replica(t *testing.T, bed *kubebed.Bed) (*sandbox.Manager, *kubeback.Backend) {
	t.Helper()
	b, err := kubeback.NewWith("kubernetes", bed.RouterConfig, routerKey, kubeback.Config{Namespace: ns, ReadyTimeout: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() }) // Close always returns nil
	m := sandbox.NewManager(b, sandbox.Config{})
	t.Cleanup(func() { _ = m.Close() }) // Close always returns nil
	return m, b
}

// TestOnBed serves sessions from the bed's warm pool, whose Pods run
// the real warden-init in pod mode, through the Manager as warden serve
// --backend kubernetes does, with the router's service account's rights.
// Its Pods' inits are in a native Warden sandbox (bedpod.Init), as
// every bed Pod's is, so its sessions run as bedpod.InitUID, and the
// file API goes through the agent's walk below the workspace, where the
// sandbox's seccomp filter denies openat2.
func TestOnBed(t *testing.T) {
	bed := kubebed.Start(t, bedpod.Init(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	install(ctx, t, bed)
	a, _ := replica(t, bed)
	admin, err := podclaim.New(bed.RouterConfig, podclaim.Config{Namespace: ns, RouterKey: routerKey, ActivityInterval: time.Hour, ReadyTimeout: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	t.Run("session", func(t *testing.T) { testSession(ctx, t, a, admin) })
	t.Run("busy interpreter", func(t *testing.T) { testBusyInterpreter(ctx, t, bed) })
	bin, dir := serveFiles(t, bed)
	t.Run("serve", func(t *testing.T) { testServe(ctx, t, bed, admin, bin, dir) })
	t.Run("list everywhere", func(t *testing.T) { testListEverywhere(ctx, t, bed, a) })
	t.Run("second replica", func(t *testing.T) { testSecondReplica(ctx, t, bed, a, admin) })
	t.Run("live replicas", func(t *testing.T) { testLive(ctx, t, bed) })
	t.Run("serve replicas", func(t *testing.T) { testServeReplicas(ctx, t, bed, bin, dir) })
	t.Run("egress", func(t *testing.T) { testEgress(ctx, t, bed, admin) })
	t.Run("tampered network", func(t *testing.T) { testTamperedNetwork(ctx, t, bed) })
	t.Run("pod deleted", func(t *testing.T) { testPodDeleted(ctx, t, bed, a, admin) })
	t.Run("ttl", func(t *testing.T) { testTTL(ctx, t, bed, a, admin) })
	t.Run("latency", func(t *testing.T) { testLatency(ctx, t, bed, a, admin) })
}

// create makes a session of the default limits with ttl.
func create(ctx context.Context, t *testing.T, m *sandbox.Manager, ttl time.Duration) sandbox.Info {
	t.Helper()
	info, err := m.Create(ctx, owner, sandbox.SessionOptions{Limits: spec.DefaultLimits, TTL: ttl})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return info
}

// run runs req in session id and returns its stdout, failing on an error
// or a non-zero exit.
func run(ctx context.Context, t *testing.T, m *sandbox.Manager, id string, req sandbox.ExecRequest) string {
	t.Helper()
	r, err := m.Exec(ctx, owner, id, req, sandbox.Stream{})
	if err != nil || r.ExitCode != 0 {
		t.Fatalf("exec %v%q: %+v, %v", req.Command, req.Code, r, err)
	}
	return r.Stdout
}

// sh is a shell command's request.
func sh(script string) sandbox.ExecRequest {
	return sandbox.ExecRequest{Command: []string{"sh", "-c", script}}
}

// testSession: a session's execs run in its Pod as its uid
// (bedpod.InitUID), a Python
// interpreter keeps its state across execs, and Delete releases the
// claim.
func testSession(ctx context.Context, t *testing.T, m *sandbox.Manager, admin *podclaim.Claimer) {
	info := create(ctx, t, m, time.Hour)
	if got, want := run(ctx, t, m, info.ID, sh("id -u; echo hi > /workspace/f; cat /workspace/f")), fmt.Sprintf("%d\nhi\n", bedpod.InitUID); got != want {
		t.Errorf("first exec: got %q, want %q (the Pod's uid and the file's line)", got, want)
	}
	checkFiles(t, m, info.ID)
	run(ctx, t, m, info.ID, sandbox.ExecRequest{Language: "python", Code: "x = 41"})
	if got := run(ctx, t, m, info.ID, sandbox.ExecRequest{Language: "python", Code: "print(x + 1)"}); got != "42\n" {
		t.Errorf("the interpreter's second run: got %q, want 42", got)
	}
	ps, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID)
	if err != nil {
		t.Fatalf("the session's claim: %v", err)
	}
	if err := m.Delete(ctx, owner, info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID); !errors.Is(err, podclaim.ErrNotFound) {
		t.Errorf("after Delete the claim: got %v, want ErrNotFound", err)
	}
	if err := admin.WaitPodGone(ctx, ps); err != nil {
		t.Error(err)
	}
}

// checkFiles: the session's file API is its Pod's agent's: an upload
// lands in the Pod's /workspace as its uid, a download reads it back,
// and a list shows it beside the file the first exec wrote.
func checkFiles(t *testing.T, m *sandbox.Manager, id string) {
	t.Helper()
	files, err := m.Files(context.Background(), owner, id)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	if e, err := files.Write("up.txt", strings.NewReader("uploaded"), 0o600); err != nil || e.Size != 8 {
		t.Fatalf("upload: got %+v, %v; want 8 bytes written", e, err)
	}
	r, _, err := files.Read("up.txt")
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	got, err := io.ReadAll(r)
	if cerr := r.Close(); cerr != nil {
		t.Errorf("closing the download: %v", cerr)
	}
	if err != nil || string(got) != "uploaded" {
		t.Errorf("download: got %q, %v; want %q", got, err, "uploaded")
	}
	list, err := files.List(".")
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	var names []string
	for _, e := range list {
		names = append(names, e.Path)
	}
	if !slices.Contains(names, "up.txt") || !slices.Contains(names, "f") {
		t.Errorf("list: got %q, want up.txt and f among them", names)
	}
	if got, want := run(context.Background(), t, m, id, sh("stat -c '%u %s' /workspace/up.txt")), fmt.Sprintf("%d 8\n", bedpod.InitUID); got != want {
		t.Errorf("the Pod sees the upload as %q, want %q (the Pod's uid and 8 bytes)", got, want)
	}
}

// testBusyInterpreter: a held session whose interpreter cell runs past
// idle timeout plus activity interval (2 s and 1 s here; a cell calls
// no Exec or Spawn of the box) keeps its claim: a reap with the same
// interval right after the cell finds it active.
func testBusyInterpreter(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	const interval = time.Second
	b, err := kubeback.NewWith("kubernetes", bed.RouterConfig, routerKey, kubeback.Config{Namespace: ns, ReadyTimeout: waitLong, ActivityInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }() // Close always returns nil
	m := sandbox.NewManager(b, sandbox.Config{})
	defer func() { _ = m.Close() }() // Close always returns nil
	reaper, err := podclaim.New(bed.RouterConfig, podclaim.Config{Namespace: ns, RouterKey: routerKey, ActivityInterval: interval, ReadyTimeout: waitLong})
	if err != nil {
		t.Fatal(err)
	}
	info, err := m.Create(ctx, owner, sandbox.SessionOptions{Limits: spec.DefaultLimits, TTL: time.Hour, IdleTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	run(ctx, t, m, info.ID, sandbox.ExecRequest{Language: "python", Code: "import time"})
	run(ctx, t, m, info.ID, sandbox.ExecRequest{Language: "python", Code: "time.sleep(5)"})
	rep, err := reaper.Reap(ctx)
	if err != nil {
		t.Fatalf("Reap: %v", err)
	}
	for _, r := range rep.Released {
		if r.Session == info.ID {
			t.Errorf("the reap released the busy session: %s", r.Reason)
		}
	}
	if _, err := reaper.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID); err != nil {
		t.Errorf("the busy session's claim after the reap: %v", err)
	}
	if err := m.Delete(ctx, owner, info.ID); err != nil {
		t.Error(err)
	}
}

// testSecondReplica: a second live replica is told the session is busy
// while the first holds the Pod's one connection; a replica that never
// saw a session serves it once the first is gone (its Close leaves the
// claim), with the Pod's files and without its processes; another owner
// cannot.
func testSecondReplica(ctx context.Context, t *testing.T, bed *kubebed.Bed, a *sandbox.Manager, admin *podclaim.Claimer) {
	first, _ := replica(t, bed)
	info := create(ctx, t, first, time.Hour)
	run(ctx, t, first, info.ID, sh("echo kept > /workspace/f"))
	run(ctx, t, first, info.ID, sandbox.ExecRequest{Language: "python", Code: "x = 1"})
	if _, err := a.Exec(ctx, owner, info.ID, sh("true"), sandbox.Stream{}); !errors.Is(err, sandbox.ErrBusy) {
		t.Errorf("a second live replica's exec while the first holds the Pod: got %v, want ErrBusy", err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID); err != nil {
		t.Fatalf("a replica's Close released its session: %v", err)
	}
	if _, err := a.Get(context.Background(), "other", info.ID); !errors.Is(err, sandbox.ErrNotFound) {
		t.Errorf("another owner's Get: got %v, want ErrNotFound", err)
	}
	if got := run(ctx, t, a, info.ID, sh("cat /workspace/f")); got != "kept\n" {
		t.Errorf("the second replica reads %q, want the file the first wrote", got)
	}
	r, err := a.Exec(ctx, owner, info.ID, sandbox.ExecRequest{Language: "python", Code: "print(x)"}, sandbox.Stream{})
	if err != nil || r.Exception == nil || r.Exception.Type != "NameError" {
		t.Errorf("the first replica's interpreter state on the second: got %+v, %v; want a NameError (processes restart)", r, err)
	}
	if err := a.Delete(ctx, owner, info.ID); err != nil {
		t.Fatal(err)
	}
}

// testPodDeleted: a Pod deleted under a live session ends it as dead,
// the reason naming the Pod.
func testPodDeleted(ctx context.Context, t *testing.T, bed *kubebed.Bed, m *sandbox.Manager, admin *podclaim.Claimer) {
	info := create(ctx, t, m, time.Hour)
	run(ctx, t, m, info.ID, sh("true"))
	ps, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.Clientset.CoreV1().Pods(ns).Delete(ctx, ps.Pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// Until the Manager buries it, the session answers as dead with the
	// stream's end; the cluster's word, naming the Pod, follows.
	var got sandbox.Info
	bedpod.WaitFor(t, "the session to be dead, its reason naming its Pod", func() bool {
		got, err = m.Get(context.Background(), owner, info.ID)
		return err == nil && got.State == sandbox.StateDead && strings.Contains(got.Reason, ps.Pod)
	})
	t.Logf("dead session's reason: %s", got.Reason)
	if _, err := m.Exec(ctx, owner, info.ID, sh("true"), sandbox.Stream{}); !errors.Is(err, sandbox.ErrDead) {
		t.Errorf("exec on the dead session: got %v, want ErrDead", err)
	}
	if err := m.Delete(ctx, owner, info.ID); err != nil {
		t.Error(err)
	}
}

// testTTL: a session's TTL is its claim's shutdownTime: the claim goes
// at the TTL, and the session with it.
func testTTL(ctx context.Context, t *testing.T, bed *kubebed.Bed, m *sandbox.Manager, admin *podclaim.Claimer) {
	waitPool(ctx, t, bed, 2)
	info := create(ctx, t, m, 5*time.Second)
	ps, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := ps.Expires.Sub(ps.Created); d < 4*time.Second || d > 6*time.Second {
		t.Errorf("claim's shutdownTime is %v after its creation, want the TTL of 5s", d)
	}
	bedpod.WaitFor(t, "the session's claim to go at its TTL", func() bool {
		_, err := admin.Find(ctx, kubeback.OwnerLabel(routerKey, owner), info.ID)
		return errors.Is(err, podclaim.ErrNotFound)
	})
	bedpod.WaitFor(t, "the session to end at its TTL", func() bool {
		_, err := m.Get(context.Background(), owner, info.ID)
		return err != nil
	})
}

// latencyRounds is how many sessions testLatency times, each against
// a refilled pool and interleaved with a bare claim.
const latencyRounds = 12

// testLatency times a session's create to the end of its first exec
// through the Manager, interleaved with a bare podclaim.Claim (create
// to the claim's Pod recorded) as the baseline, each against a pool
// refilled to 4; logged, never asserted.
func testLatency(ctx context.Context, t *testing.T, bed *kubebed.Bed, m *sandbox.Manager, admin *podclaim.Claimer) {
	if testing.Short() {
		t.Skip("timing is skipped under -short")
	}
	var full, creates, bare []time.Duration
	for i := range latencyRounds {
		waitPool(ctx, t, bed, 4)
		begin := time.Now()
		info := create(ctx, t, m, time.Hour)
		creates = append(creates, time.Since(begin))
		run(ctx, t, m, info.ID, sh("true"))
		full = append(full, time.Since(begin))
		if err := m.Delete(ctx, owner, info.ID); err != nil {
			t.Fatal(err)
		}
		waitPool(ctx, t, bed, 4)
		begin = time.Now()
		ps, err := admin.Claim(ctx, podclaim.Request{Session: fmt.Sprintf("bare-%d", i), Owner: owner, Template: pool, TTL: time.Hour, IdleTimeout: time.Hour, Limits: spec.DefaultLimits})
		if err != nil {
			t.Fatal(err)
		}
		bare = append(bare, time.Since(begin))
		if err := admin.Release(ctx, ps); err != nil {
			t.Fatal(err)
		}
		if err := admin.WaitPodGone(ctx, ps); err != nil {
			t.Fatal(err)
		}
	}
	fp50, fmax := quantiles(full)
	cp50, cmax := quantiles(creates)
	bp50, bmax := quantiles(bare)
	t.Logf("create to first exec: p50 %v, max (p99 of %d) %v; of it the create (claim, dial, attach): p50 %v, max %v; bare podclaim.Claim: p50 %v, max %v; ratio of p50s %.2fx",
		fp50, latencyRounds, fmax, cp50, cmax, bp50, bmax, float64(fp50)/float64(bp50))
}

// quantiles is the median and the maximum of d.
func quantiles(d []time.Duration) (p50, maxd time.Duration) {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2], s[len(s)-1]
}
