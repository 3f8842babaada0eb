package podclaim_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

const (
	// ns is deploy/'s sandbox namespace, where the router's Role is.
	ns = kubebed.SandboxNamespace
	// pool is deploy/'s default template and warm pool.
	pool = "default"
)

// bedKey is the router key the replicas seal network records with.
var bedKey = bytes.Repeat([]byte{0x6b}, podinit.MinRouterKey)

// replica is one router replica: a Claimer with the router's service
// account's rights, counting its API calls.
type replica struct {
	*podclaim.Claimer
	calls *callCounter
}

// newReplica makes a replica writing activity at most once per interval.
func newReplica(t *testing.T, bed *kubebed.Bed, interval time.Duration) *replica {
	t.Helper()
	return newReplicaWith(t, bed, podclaim.Config{ActivityInterval: interval})
}

// newReplicaWith makes a replica of cfg in the bed's sandbox namespace.
func newReplicaWith(t *testing.T, bed *kubebed.Bed, cfg podclaim.Config) *replica {
	t.Helper()
	rc := rest.CopyConfig(bed.RouterConfig)
	calls := &callCounter{}
	rc.Wrap(calls.wrap)
	cfg.Namespace, cfg.ReadyTimeout, cfg.RouterKey = ns, bedpod.WaitLong, bedKey
	c, err := podclaim.New(rc, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &replica{Claimer: c, calls: calls}
}

// callCounter counts the API calls that go through it, and keeps when
// each began and ended (for where a claim's time goes).
type callCounter struct {
	mu            sync.Mutex
	reads, writes int
	trace         []call
}

// call is one API call: its method, path and span.
type call struct {
	method, path string
	start, end   time.Time
}

// roundTripFunc is a function as an http.RoundTripper.
type roundTripFunc func(*http.Request) (*http.Response, error)

// RoundTrip calls f.
func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// wrap counts rt's requests: GETs (watches included) as reads, the rest
// as writes.
func (c *callCounter) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		c.mu.Lock()
		if r.Method == http.MethodGet {
			c.reads++
		} else {
			c.writes++
		}
		c.mu.Unlock()
		start := time.Now()
		resp, err := rt.RoundTrip(r)
		c.mu.Lock()
		c.trace = append(c.trace, call{r.Method, r.URL.Path, start, time.Now()})
		c.mu.Unlock()
		return resp, err
	})
}

// since is the calls begun at or after t, in the order they ended.
func (c *callCounter) since(t time.Time) []call {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []call
	for _, k := range c.trace {
		if !k.start.Before(t) {
			out = append(out, k)
		}
	}
	return out
}

// counts is the reads and writes so far.
func (c *callCounter) counts() (reads, writes int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads, c.writes
}

// request is a session request on the default template.
func request(id string) podclaim.Request {
	return podclaim.Request{Session: id, Owner: "acme", Template: pool, TTL: time.Hour, IdleTimeout: 10 * time.Minute, Limits: spec.DefaultLimits}
}

// TestOnBed runs the claimer against the bed with deploy/'s namespaces,
// router RBAC, default template and warm pool, every call as the
// router's service account: what it does is what the Role allows.
func TestOnBed(t *testing.T) {
	bed := kubebed.Start(t, bedpod.Stub)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	install(ctx, t, bed)
	waitPool(ctx, t, bed, 4)
	a, b := newReplica(t, bed, time.Hour), newReplica(t, bed, time.Hour)
	t.Run("claim find touch release", func(t *testing.T) { testClaimFindRelease(ctx, t, a, b) })
	t.Run("no such pool", func(t *testing.T) { testNoSuchPool(ctx, t, a) })
	t.Run("pod deleted", func(t *testing.T) { testPodDeleted(ctx, t, bed, a, b) })
	t.Run("pod failed", func(t *testing.T) { testPodFailed(ctx, t, a, b) })
	t.Run("ttl", func(t *testing.T) { testTTL(ctx, t, a, b) })
	t.Run("idle reap by two reapers", func(t *testing.T) { testTwoReapers(ctx, t, bed) })
	t.Run("latency", func(t *testing.T) { testLatency(ctx, t, bed) })
	t.Run("throughput", func(t *testing.T) { testThroughput(ctx, t, bed) })
}

// install installs Warden's side (kubebed.InstallWarden).
func install(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	t.Helper()
	if err := bed.InstallWarden(ctx); err != nil {
		t.Fatal(err)
	}
}

// waitPool waits until the warm pool has n ready sandboxes.
func waitPool(ctx context.Context, t *testing.T, bed *kubebed.Bed, n int32) {
	t.Helper()
	var wp extv1.SandboxWarmPool
	bedpod.WaitFor(t, fmt.Sprintf("the warm pool to hold %d ready sandboxes", n), func() bool {
		err := bed.Extensions.Get().Namespace(ns).Resource("sandboxwarmpools").Name(pool).Do(ctx).Into(&wp)
		return err == nil && wp.Status.ReadyReplicas == n
	})
}

// setPool resizes the warm pool to n and waits until it is full.
func setPool(ctx context.Context, t *testing.T, bed *kubebed.Bed, n int32) {
	t.Helper()
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, n)
	if err := bed.Extensions.Patch(types.MergePatchType).Namespace(ns).Resource("sandboxwarmpools").Name(pool).Body(patch).Do(ctx).Error(); err != nil {
		t.Fatalf("resizing the warm pool: %v", err)
	}
	waitPool(ctx, t, bed, n)
}

// findID ends in '-', as 1 in 32 of sandbox.Manager's ids do, which a
// label value may not: the claim must keep it in an annotation.
const findID = "ses_find-"

func testClaimFindRelease(ctx context.Context, t *testing.T, a, b *replica) {
	s, err := a.Claim(ctx, request(findID))
	if err != nil {
		t.Fatal(err)
	}
	if s.Sandbox == "" || s.Sandbox == s.Claim || s.Pod == "" || s.PodUID == "" || s.Ready.IsZero() {
		t.Errorf("claimed session %+v: want a warm pool sandbox (not one named after the claim), its Pod and Ready time", s)
	}
	if got := bedpod.Get(ctx, t, "http://"+s.PodIP.String()+":7070/"); got != s.Pod {
		t.Errorf("the process on the session's Pod IP %v says it is Pod %q, want %q", s.PodIP, got, s.Pod)
	}
	if _, err := b.Claim(ctx, request(findID)); !apierrors.IsAlreadyExists(err) {
		t.Errorf("a second claim of a live session from another replica: got %v, want AlreadyExists", err)
	}
	got, err := b.Find(ctx, "acme", findID)
	if err != nil {
		t.Fatalf("finding the session from another replica: %v", err)
	}
	if got.Pod != s.Pod || got.PodUID != s.PodUID || got.PodIP != s.PodIP || got.Owner != "acme" || got.Limits != spec.DefaultLimits {
		t.Errorf("found %+v, want the claimed %+v", got, s)
	}
	checkList(ctx, t, b, "acme", findID, true)
	checkList(ctx, t, b, "other", findID, false)
	if _, err := b.Find(ctx, "other", findID); !errors.Is(err, podclaim.ErrNotFound) || strings.Contains(err.Error(), s.Claim) {
		t.Errorf("finding another owner's session: got %v, want ErrNotFound naming nothing of it", err)
	}
	if _, err := b.List(ctx, ""); err == nil {
		t.Error("listing the empty owner's sessions: got every tenant's, want an error")
	}
	checkTouches(ctx, t, a, b, got)
	if err := a.Release(ctx, got); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitPodGone(ctx, got); err != nil {
		t.Error(err)
	}
	if _, err := b.Find(ctx, "acme", findID); !errors.Is(err, podclaim.ErrNotFound) {
		t.Errorf("finding a released session: got %v, want ErrNotFound", err)
	}
	if err := b.Release(ctx, got); !errors.Is(err, podclaim.ErrNotFound) {
		t.Errorf("releasing it again: got %v, want ErrNotFound", err)
	}
}

// checkList checks whether owner's sessions include id.
func checkList(ctx context.Context, t *testing.T, r *replica, owner, id string, want bool) {
	t.Helper()
	list, err := r.List(ctx, owner)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range list {
		found = found || s.ID == id
	}
	if found != want {
		t.Errorf("owner %s's sessions %v: has %s %v, want %v", owner, list, id, found, want)
	}
}

// checkTouches counts the writes of 100 Touches on each replica, within
// one activity interval: the claiming replica wrote the time at Claim,
// so it writes none, the other one.
func checkTouches(ctx context.Context, t *testing.T, a, b *replica, s *podclaim.Session) {
	t.Helper()
	_, aw := a.calls.counts()
	_, bw := b.calls.counts()
	for range 100 {
		for _, r := range []*replica{a, b} {
			if err := r.Touch(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, aw2 := a.calls.counts()
	_, bw2 := b.calls.counts()
	if aw2-aw != 0 || bw2-bw != 1 {
		t.Errorf("100 Touches on each replica wrote %d times on the claiming one, %d on the other; want 0 and 1", aw2-aw, bw2-bw)
	}
}

func testNoSuchPool(ctx context.Context, t *testing.T, a *replica) {
	r := request("s-nopool")
	r.Template = "nosuch"
	_, err := a.Claim(ctx, r)
	if err == nil || !strings.Contains(err.Error(), "WarmPoolNotFound") || !strings.Contains(err.Error(), "create a SandboxWarmPool") {
		t.Errorf("claiming from a missing warm pool: got %v, want WarmPoolNotFound and how to fix it", err)
	}
	if _, err := a.Find(ctx, "acme", "s-nopool"); !errors.Is(err, podclaim.ErrNotFound) {
		t.Errorf("the failed claim: got %v, want it released (ErrNotFound)", err)
	}
}

func testPodDeleted(ctx context.Context, t *testing.T, bed *kubebed.Bed, a, b *replica) {
	s, err := a.Claim(ctx, request("s-podgone"))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.WatchPods(ctx); err != nil {
		t.Fatal(err)
	}
	heard := make(chan error, 1)
	stop, err := a.OnDeath(ctx, s, func(err error) { heard <- err })
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if err := bed.Clientset.CoreV1().Pods(ns).Delete(ctx, s.Pod, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-heard:
		if !errors.Is(err, podclaim.ErrDead) || !strings.Contains(err.Error(), "Pod "+s.Pod) {
			t.Errorf("OnDeath of a Pod deleted under its claim: got %v, want ErrDead naming Pod %s", err, s.Pod)
		}
	case <-time.After(bedpod.WaitLong):
		t.Fatalf("OnDeath did not hear of Pod %s's deletion within %v", s.Pod, bedpod.WaitLong)
	}
	dead := waitDead(ctx, t, b, "s-podgone")
	if !strings.Contains(dead.Error(), "Pod "+s.Pod) {
		t.Errorf("a Pod deleted under its claim: got %q, want it named", dead)
	}
	waitReaped(ctx, t, b, "s-podgone")
}

func testPodFailed(ctx context.Context, t *testing.T, a, b *replica) {
	s, err := a.Claim(ctx, request("s-podfail"))
	if err != nil {
		t.Fatal(err)
	}
	bedpod.AskExit(ctx, "http://"+s.PodIP.String()+":7070")
	dead := waitDead(ctx, t, b, "s-podfail")
	if want := fmt.Sprintf("Pod %s failed: container sandbox exited %d", s.Pod, bedpod.ExitCode); !strings.Contains(dead.Error(), want) {
		t.Errorf("a Pod whose process died: got %q, want %q", dead, want)
	}
	waitReaped(ctx, t, b, "s-podfail")
}

// testTTL claims a session with a short TTL and waits, with no reaper,
// for it to go: agent-sandbox's controller enforces the claim's
// shutdownTime.
func testTTL(ctx context.Context, t *testing.T, a, b *replica) {
	r := request("s-ttl")
	r.TTL, r.IdleTimeout = 20*time.Second, 20*time.Second
	s, err := a.Claim(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	bedpod.WaitFor(t, "the controller to end the session at its TTL", func() bool {
		_, err := b.Find(ctx, "acme", "s-ttl")
		return errors.Is(err, podclaim.ErrNotFound)
	})
	if err := b.WaitPodGone(ctx, s); err != nil {
		t.Error(err)
	}
}

// testTwoReapers lets three sessions go idle and has two replicas reap
// at once: each session is released once, by one of them, and neither
// fails.
func testTwoReapers(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	r1, r2 := newReplica(t, bed, time.Second), newReplica(t, bed, time.Second)
	var sessions []*podclaim.Session
	for i := range 3 {
		r := request(fmt.Sprintf("s-idle-%d", i))
		r.IdleTimeout = time.Second
		s, err := r1.Claim(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	bedpod.WaitFor(t, "the sessions to be idle past their timeout and the activity interval", func() bool {
		return time.Since(sessions[len(sessions)-1].LastActive) > 3*time.Second
	})
	var wg sync.WaitGroup
	reports := make([]podclaim.ReapReport, 2)
	errs := make([]error, 2)
	for i, r := range []*replica{r1, r2} {
		wg.Go(func() { reports[i], errs[i] = r.Reap(ctx) })
	}
	wg.Wait()
	released := map[string]int{}
	for i := range reports {
		if errs[i] != nil {
			t.Errorf("reaper %d: %v", i, errs[i])
		}
		for _, r := range reports[i].Released {
			released[r.Session]++
			if !strings.HasPrefix(r.Reason, "idle for") {
				t.Errorf("reaper %d released %s: %q, want idle", i, r.Session, r.Reason)
			}
		}
	}
	t.Logf("two reapers at once: %+v, %+v", reports[0], reports[1])
	for _, s := range sessions {
		if released[s.ID] != 1 {
			t.Errorf("session %s released %d times, want once", s.ID, released[s.ID])
		}
		if err := r2.WaitPodGone(ctx, s); err != nil {
			t.Error(err)
		}
	}
}

// waitDead waits until Find reports session id dead, and returns that.
func waitDead(ctx context.Context, t *testing.T, r *replica, id string) error {
	t.Helper()
	var err error
	bedpod.WaitFor(t, "session "+id+" to be reported dead", func() bool {
		_, err = r.Find(ctx, "acme", id)
		return errors.Is(err, podclaim.ErrDead)
	})
	if strings.Contains(err.Error(), "\n") {
		t.Errorf("dead session's reason is not one line: %q", err)
	}
	t.Logf("reported: %v", err)
	return err
}

// waitReaped reaps until a pass releases session id (or another reaper
// did: it is gone).
func waitReaped(ctx context.Context, t *testing.T, r *replica, id string) {
	t.Helper()
	bedpod.WaitFor(t, "a reaper to release dead session "+id, func() bool {
		rep, err := r.Reap(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range rep.Released {
			if x.Session == id {
				t.Logf("reaped %s: %s", id, x.Reason)
				return true
			}
		}
		return false
	})
}
