package podclaim_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/poddial"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// firstExecs is how many claim-to-first-exec runs the measurement times.
const firstExecs = 24

// TestFirstExecOnBed runs issue 23's path end to end on the bed with
// Warden's init in a native Warden sandbox as every Pod's process
// (bedpod.Init): a router replica claims a session from deploy/'s warm
// pool, dials the claimed Pod with the key derived from its UID,
// attaches a session and runs its first exec, which must run as the
// Pod's uid (bedpod.InitUID). Without -short it then
// times firstExecs such runs, each interleaved with a bare claim (the
// baseline), and logs where the time goes by step; never asserted.
func TestFirstExecOnBed(t *testing.T) {
	bed := kubebed.Start(t, bedpod.Init(t))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	install(ctx, t, bed)
	waitPool(ctx, t, bed, 4)
	r := newReplica(t, bed, time.Hour)
	routerKey := make([]byte, podinit.MinRouterKey)
	if _, err := rand.Read(routerKey); err != nil {
		t.Fatal(err)
	}
	st, out := firstExec(ctx, t, r, routerKey, "s-first-0", []string{"id", "-u"})
	if want := fmt.Sprintf("%d\n", bedpod.InitUID); out != want {
		t.Errorf("the first exec's id -u: got %q, want %q (the Pod's uid)", out, want)
	}
	t.Logf("one claim to first exec: %v", st)
	if testing.Short() {
		return
	}
	measureFirstExec(ctx, t, bed, r, routerKey)
}

// steps is where one claim-to-first-exec run's time went, and which
// Pod it had.
type steps struct {
	created, ready, read, recorded, dialed, attached, execd time.Duration
	pod                                                     types.UID
}

// total is the run's whole time, from Claim's call to the exec's result.
func (s steps) total() time.Duration {
	return s.created + s.ready + s.read + s.recorded + s.dialed + s.attached + s.execd
}

func (s steps) String() string {
	return fmt.Sprintf("%v (claim created %v, Ready seen %v, Sandbox and Pod read %v, Pod recorded %v, dial and handshake %v, attach %v, exec %v)",
		ms(s.total()), ms(s.created), ms(s.ready), ms(s.read), ms(s.recorded), ms(s.dialed), ms(s.attached), ms(s.execd))
}

// firstExec claims session id on r, dials its Pod, attaches and runs
// command, and is the time of each step and the command's output; the
// session is closed and released, and its Pod waited out, before it
// returns.
func firstExec(ctx context.Context, t *testing.T, r *replica, routerKey []byte, id string, command []string) (steps, string) {
	t.Helper()
	var st steps
	start := time.Now()
	s, err := r.Claim(ctx, request(id))
	if err != nil {
		t.Fatal(err)
	}
	released := false
	t.Cleanup(func() {
		// a run that failed midway still frees its place in the pool
		// for the bed's later tests
		if !released {
			releaseLeft(t, r, s)
		}
	})
	claimed := time.Now()
	st.pod = s.PodUID
	st.created, st.ready, st.read, st.recorded = claimSteps(t, r.calls.since(start), start, claimed)
	key, err := podinit.Key(routerKey, string(s.PodUID))
	if err != nil {
		t.Fatal(err)
	}
	conn, adoption, err := poddial.Dial(ctx, netip.AddrPortFrom(s.PodIP, podinit.Port).String(), key)
	if err != nil || adoption != podinit.Adopted {
		t.Fatalf("dialing session %s's Pod %s: %v, %v; want Adopted", id, s.Pod, adoption, err)
	}
	dialed := time.Now()
	box, err := poddial.Attach(ctx, conn, spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}, nil)
	if err != nil {
		t.Fatalf("attaching to session %s's Pod %s: %v", id, s.Pod, err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			if err := box.Close(); err != nil {
				t.Logf("closing session %s after a failed run: %v", id, err)
			}
		}
	})
	attached := time.Now()
	res, err := box.Exec(ctx, agent.ExecSpec{Command: command}, agent.IO{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("session %s's first exec %q: %+v, %v", id, command, res, err)
	}
	st.dialed, st.attached, st.execd = dialed.Sub(claimed), attached.Sub(dialed), time.Since(attached)
	closed = true
	if err := box.Close(); err != nil {
		t.Errorf("closing session %s: %v", id, err)
	}
	released = true
	if err := r.Release(ctx, s); err != nil {
		t.Fatal(err)
	}
	if err := r.WaitPodGone(ctx, s); err != nil {
		t.Fatal(err)
	}
	return st, res.Stdout
}

// claimSteps splits Claim's time (start to end) by its API calls: to
// the claim's create's end, then to the first read of the Sandbox (the
// Ready event seen), then to the record's patch (the Sandbox and Pod
// read), then to the end (the patch).
func claimSteps(t *testing.T, calls []call, start, end time.Time) (created, ready, read, recorded time.Duration) {
	t.Helper()
	first := func(method, part string) call {
		i := slices.IndexFunc(calls, func(c call) bool { return c.method == method && strings.Contains(c.path, part) })
		if i < 0 {
			t.Fatalf("no %s of %s among Claim's %d calls", method, part, len(calls))
		}
		return calls[i]
	}
	posted, box, patch := first("POST", "/sandboxclaims"), first("GET", "/sandboxes/"), first("PATCH", "/sandboxclaims/")
	return posted.end.Sub(start), box.start.Sub(posted.end), patch.start.Sub(box.start), end.Sub(patch.start)
}

// measureFirstExec times firstExecs claim-to-first-exec runs one at a
// time from a full warm pool of measurePool, each interleaved with a
// bare claim, and logs p50 and p99 of both, their ratio, and the p50 of
// each step.
func measureFirstExec(ctx context.Context, t *testing.T, bed *kubebed.Bed, r *replica, routerKey []byte) {
	setPool(ctx, t, bed, measurePool)
	var runs []steps
	var raw []time.Duration
	_, w0 := r.calls.counts()
	for i := range firstExecs {
		waitPool(ctx, t, bed, measurePool)
		raw = append(raw, rawClaim(ctx, t, bed, fmt.Sprintf("raw-fe-%d", i)))
		waitPool(ctx, t, bed, measurePool)
		st, _ := firstExec(ctx, t, r, routerKey, fmt.Sprintf("s-fe-%d", i), []string{"/bin/true"})
		runs = append(runs, st)
	}
	_, w1 := r.calls.counts()
	total := func(s steps) time.Duration { return s.total() }
	tot := pick(runs, total)
	slices.Sort(raw)
	t.Logf("claim to first exec (Claim, Dial, Attach, exec /bin/true) with warden-init pod as every Pod's process, %d runs one at a time from a full warm pool of %d: p50 %v, p99 (max) %v, min %v",
		firstExecs, measurePool, ms(tot[len(tot)/2]), ms(tot[len(tot)-1]), ms(tot[0]))
	t.Logf("baseline, a bare claim's create to Ready interleaved with them: p50 %v, p99 (max) %v; claim to first exec's p50 is %.2fx the baseline's",
		ms(raw[len(raw)/2]), ms(raw[len(raw)-1]), float64(tot[len(tot)/2])/float64(raw[len(raw)/2]))
	var parts []string
	for _, f := range []struct {
		name string
		get  func(steps) time.Duration
	}{
		{"claim created", func(s steps) time.Duration { return s.created }},
		{"Ready seen", func(s steps) time.Duration { return s.ready }},
		{"Sandbox and Pod read", func(s steps) time.Duration { return s.read }},
		{"Pod recorded", func(s steps) time.Duration { return s.recorded }},
		{"dial and handshake", func(s steps) time.Duration { return s.dialed }},
		{"attach", func(s steps) time.Duration { return s.attached }},
		{"first exec", func(s steps) time.Duration { return s.execd }},
	} {
		d := pick(runs, f.get)
		parts = append(parts, fmt.Sprintf("%s %v", f.name, ms(d[len(d)/2])))
	}
	t.Logf("p50 of each step: %s; router API writes per run %.1f (create, record, delete)", strings.Join(parts, ", "), float64(w1-w0)/firstExecs)
}

// pick is get of every run, sorted.
func pick(runs []steps, get func(steps) time.Duration) []time.Duration {
	out := make([]time.Duration, len(runs))
	for i, s := range runs {
		out[i] = get(s)
	}
	slices.Sort(out)
	return out
}

// releaseLeft releases session s, which a failed run left claimed.
func releaseLeft(t *testing.T, r *replica, s *podclaim.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := r.Release(ctx, s); err != nil && !errors.Is(err, podclaim.ErrNotFound) {
		t.Logf("releasing session %s after a failed run: %v", s.ID, err)
	}
}
