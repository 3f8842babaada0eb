package podclaim_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/podinit"
)

// TestBoxingCostOnBed measures what running each Pod's init in a native
// Warden sandbox (bedpod.Init) costs a session's claim to first exec,
// against the same init unboxed (bedpod.Unboxed), on one bed whose
// kubelet starts its Pods alternately boxed and unboxed (mixedPods). A
// warm pool of one makes each claim take the Pod started after the last
// claim's, so the two kinds interleave run by run. It logs p50 and max
// of each kind (a dozen runs each: too few for a p99), their ratios, and
// the p50 of the steps a box can change; never asserted. Skipped under
// -short.
func TestBoxingCostOnBed(t *testing.T) {
	if testing.Short() {
		t.Skip("measures for minutes; not in -short")
	}
	mixed := &mixedPods{boxed: bedpod.Init(t), unboxed: bedpod.Unboxed(t), kinds: map[types.UID]bool{}}
	bed := kubebed.Start(t, mixed.command)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	install(ctx, t, bed)
	waitPool(ctx, t, bed, 4)
	setPool(ctx, t, bed, 1)
	r := newReplica(t, bed, time.Hour)
	routerKey := make([]byte, podinit.MinRouterKey)
	if _, err := rand.Read(routerKey); err != nil {
		t.Fatal(err)
	}
	byKind := map[bool][]steps{}
	for i := range firstExecs {
		waitPool(ctx, t, bed, 1)
		st, _ := firstExec(ctx, t, r, routerKey, fmt.Sprintf("s-box-%d", i), []string{"/bin/true"})
		boxed, ok := mixed.kind(st.pod)
		if !ok {
			t.Fatalf("run %d had Pod %s, which the kubelet did not start", i, st.pod)
		}
		byKind[boxed] = append(byKind[boxed], st)
	}
	logBoxingCost(t, byKind[true], byKind[false])
}

// logBoxingCost logs claim to first exec of the boxed and unboxed runs.
func logBoxingCost(t *testing.T, boxed, unboxed []steps) {
	t.Helper()
	if len(boxed) == 0 || len(unboxed) == 0 {
		t.Fatalf("runs of each kind: %d boxed, %d unboxed; want some of both", len(boxed), len(unboxed))
	}
	total := func(s steps) time.Duration { return s.total() }
	b, u := pick(boxed, total), pick(unboxed, total)
	t.Logf("claim to first exec (Claim, Dial, Attach, exec /bin/true), interleaved on one bed: boxed (%d runs) p50 %v, max %v; unboxed (%d runs) p50 %v, max %v; boxed/unboxed p50 %.2fx, max %.2fx",
		len(b), ms(b[len(b)/2]), ms(b[len(b)-1]), len(u), ms(u[len(u)/2]), ms(u[len(u)-1]),
		float64(b[len(b)/2])/float64(u[len(u)/2]), float64(b[len(b)-1])/float64(u[len(u)-1]))
	for _, f := range []struct {
		name string
		get  func(steps) time.Duration
	}{
		{"dial and handshake", func(s steps) time.Duration { return s.dialed }},
		{"attach", func(s steps) time.Duration { return s.attached }},
		{"first exec", func(s steps) time.Duration { return s.execd }},
	} {
		bs, us := pick(boxed, f.get), pick(unboxed, f.get)
		t.Logf("%s p50: boxed %v, unboxed %v", f.name, ms(bs[len(bs)/2]), ms(us[len(us)/2]))
	}
}

// mixedPods is a PodCommand starting the bed's Pods' inits alternately
// boxed and unboxed, in the order the kubelet starts them, and
// remembering which each Pod got.
type mixedPods struct {
	boxed, unboxed kubebed.PodCommand
	mu             sync.Mutex
	started        int
	// kinds says, by Pod UID, whether the Pod's init is boxed.
	kinds map[types.UID]bool
}

// command is the PodCommand.
func (m *mixedPods) command(pod *corev1.Pod, addr netip.AddrPort) kubebed.PodProcess {
	m.mu.Lock()
	boxed := m.started%2 == 0
	m.started++
	m.kinds[pod.UID] = boxed
	m.mu.Unlock()
	if boxed {
		return m.boxed(pod, addr)
	}
	return m.unboxed(pod, addr)
}

// kind says whether the Pod of uid was started boxed, if it was started.
func (m *mixedPods) kind(uid types.UID) (boxed, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	boxed, ok = m.kinds[uid]
	return boxed, ok
}
