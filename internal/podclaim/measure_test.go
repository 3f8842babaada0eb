package podclaim_test

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
	"github.com/warden-sandbox/warden/internal/podclaim"
)

// Sizes of the measurements: the warm pool, the sequential claims timed,
// and each of two replicas' claims in the throughput run.
const (
	measurePool    = 8
	latencyClaims  = 24
	perReplicaRuns = 12
)

// testLatency times Claim (create, wait for Ready by a watch, read the
// Sandbox and Pod, record the Pod) over latencyClaims claims one after
// another, each against a full warm pool, and counts API writes per
// claim: the router's own (its transport) and the whole cluster's (the
// API server's apiserver_request_total: controller, kubelet, garbage
// collector too). Logged, never asserted: docs/kubernetes.md.
func testLatency(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	if testing.Short() {
		t.Skip("measures for minutes; not in -short")
	}
	setPool(ctx, t, bed, measurePool)
	r := newReplica(t, bed, time.Hour)
	_, w0 := r.calls.counts()
	var lat, raw []time.Duration
	claimWrites, rawWrites := map[string]float64{}, map[string]float64{}
	for i := range latencyClaims {
		waitPool(ctx, t, bed, measurePool)
		before := apiWrites(ctx, t, bed)
		raw = append(raw, rawClaim(ctx, t, bed, fmt.Sprintf("raw-%d", i)))
		waitPool(ctx, t, bed, measurePool)
		mid := apiWrites(ctx, t, bed)
		addWrites(rawWrites, before, mid)
		id := fmt.Sprintf("s-lat-%d", i)
		start := time.Now()
		s, err := r.Claim(ctx, request(id))
		if err != nil {
			t.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		if err := r.Release(ctx, s); err != nil {
			t.Fatal(err)
		}
		if err := r.WaitPodGone(ctx, s); err != nil {
			t.Fatal(err)
		}
		waitPool(ctx, t, bed, measurePool)
		addWrites(claimWrites, mid, apiWrites(ctx, t, bed))
	}
	_, w1 := r.calls.counts()
	slices.Sort(lat)
	slices.Sort(raw)
	t.Logf("Claim (create, Ready, Pod read and recorded), %d claims one at a time from a full warm pool of %d: p50 %v, p90 %v, p99 (max) %v, min %v",
		latencyClaims, measurePool, ms(lat[len(lat)/2]), ms(lat[len(lat)*9/10]), ms(lat[len(lat)-1]), ms(lat[0]))
	t.Logf("baseline, a bare claim's create to Ready interleaved with them: p50 %v, p90 %v, max %v; Claim's p50 is %.2fx the baseline's",
		ms(raw[len(raw)/2]), ms(raw[len(raw)*9/10]), ms(raw[len(raw)-1]), float64(lat[len(lat)/2])/float64(raw[len(raw)/2]))
	logWrites(t, "Claims one at a time, each from its create to the pool refilled after its Pod went", float64(w1-w0)/latencyClaims, claimWrites, latencyClaims)
	logWrites(t, "baseline bare claims, the same span", 0, rawWrites, latencyClaims)
}

// addWrites adds the writes between before and after to sum.
func addWrites(sum, before, after map[string]float64) {
	for k, v := range diffWrites(before, after) {
		sum[k] += v
	}
}

// testThroughput has two replicas claim and release sessions as fast as
// they can, in parallel, from the warm pool of measurePool, and logs the
// sustained claims per second and the writes per claim: rounds without
// and with a holder recorded (Config.Holder, as replicas started with
// --kube-advertise do) interleaved.
func testThroughput(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	if testing.Short() {
		t.Skip("measures for minutes; not in -short")
	}
	setPool(ctx, t, bed, measurePool)
	for round, holder := range []bool{false, true, false, true} {
		throughputRound(ctx, t, bed, round, holder)
	}
}

// throughputRound is one round of testThroughput: two fresh replicas,
// recording a holder or not, each claiming and releasing perReplicaRuns
// sessions.
func throughputRound(ctx context.Context, t *testing.T, bed *kubebed.Bed, round int, holder bool) {
	cfg := podclaim.Config{ActivityInterval: time.Hour}
	if holder {
		cfg.Holder = func(uid types.UID) string { return "10.0.0.7:8080/" + string(uid) }
	}
	replicas := []*replica{newReplicaWith(t, bed, cfg), newReplicaWith(t, bed, cfg)}
	waitPool(ctx, t, bed, measurePool)
	before := apiWrites(ctx, t, bed)
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, len(replicas))
	for i, r := range replicas {
		wg.Go(func() { errs[i] = claimLoop(ctx, r, fmt.Sprintf("s-tp-%d-%d", round, i)) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("round %d, replica %d: %v", round, i, err)
		}
	}
	n := len(replicas) * perReplicaRuns
	var routerWrites int
	for _, r := range replicas {
		_, w := r.calls.counts()
		routerWrites += w
	}
	run := fmt.Sprintf("round %d, two replicas, holder recorded %v", round, holder)
	t.Logf("%s, %d claims each in parallel (claim, then release): %d claims in %v, %.1f claims/s",
		run, perReplicaRuns, n, ms(elapsed), float64(n)/elapsed.Seconds())
	waitPool(ctx, t, bed, measurePool)
	logWrites(t, run, float64(routerWrites)/float64(n), diffWrites(before, apiWrites(ctx, t, bed)), n)
}

// rawClaim is the baseline of a claim: as an admin, the time from the
// POST of a bare claim on the pool to a watch's first sight of its Ready
// condition True, as TestBed/warm_pool_claims measures it; the claim is
// then deleted and its Pod (named as its Sandbox) waited out, as the
// Claim side waits for its own, so neither's teardown runs in the
// other's time.
func rawClaim(ctx context.Context, t *testing.T, bed *kubebed.Bed, name string) time.Duration {
	t.Helper()
	claims := bed.Extensions.Get().Namespace(ns).Resource("sandboxclaims")
	w, err := claims.VersionedParams(&metav1.ListOptions{
		FieldSelector: "metadata.name=" + name, ResourceVersion: "0", Watch: true,
	}, metav1.ParameterCodec).Watch(ctx)
	if err != nil {
		t.Fatalf("watching claim %s: %v", name, err)
	}
	defer w.Stop()
	claim := &extv1.SandboxClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: extv1.SandboxClaimSpec{WarmPoolRef: extv1.SandboxWarmPoolRef{Name: pool}}}
	start := time.Now()
	if err := bed.Extensions.Post().Namespace(ns).Resource("sandboxclaims").Body(claim).Do(ctx).Error(); err != nil {
		t.Fatalf("creating claim %s: %v", name, err)
	}
	var d time.Duration
	var box string
	timeout := time.After(bedpod.WaitLong)
	for d == 0 {
		select {
		case ev, ok := <-w.ResultChan():
			c, isClaim := ev.Object.(*extv1.SandboxClaim)
			if !ok || !isClaim {
				t.Fatalf("watching claim %s: %v", name, ev.Object)
			}
			if apimeta.IsStatusConditionTrue(c.Status.Conditions, "Ready") {
				d, box = time.Since(start), c.Status.SandboxStatus.Name
			}
		case <-timeout:
			t.Fatalf("claim %s was not Ready within %v", name, bedpod.WaitLong)
		}
	}
	if err := bed.Extensions.Delete().Namespace(ns).Resource("sandboxclaims").Name(name).Do(ctx).Error(); err != nil {
		t.Fatalf("deleting claim %s: %v", name, err)
	}
	bedpod.WaitFor(t, "bare claim "+name+"'s Pod "+box+" to go", func() bool {
		_, err := bed.Clientset.CoreV1().Pods(ns).Get(ctx, box, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	return d
}

// claimLoop claims and releases perReplicaRuns sessions on r, named
// after prefix.
func claimLoop(ctx context.Context, r *replica, prefix string) error {
	for j := range perReplicaRuns {
		name := fmt.Sprintf("%s-%d", prefix, j)
		s, err := r.Claim(ctx, request(name))
		if err != nil {
			return err
		}
		if err := r.Release(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// ms rounds d to a millisecond for the logs.
func ms(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

// logWrites logs the router's writes per claim and the cluster's, by
// resource (the API server's own background writes, leases and
// endpoints, included: they are listed apart).
func logWrites(t *testing.T, run string, router float64, cluster map[string]float64, claims int) {
	t.Helper()
	var total float64
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(cluster)) {
		total += cluster[k]
		parts = append(parts, fmt.Sprintf("%s %.1f", k, cluster[k]/float64(claims)))
	}
	t.Logf("%s: API writes per claim: router %.1f; whole cluster %.1f (%s)", run, router, total/float64(claims), strings.Join(parts, ", "))
}

// requestTotal matches a line of apiserver_request_total, capturing its
// labels and value.
var requestTotal = regexp.MustCompile(`^apiserver_request_total\{([^}]*)\} (\S+)$`)

// apiWrites reads the API server's count of write requests (POST, PUT,
// PATCH, DELETE, APPLY) by "verb resource[/subresource]".
func apiWrites(ctx context.Context, t *testing.T, bed *kubebed.Bed) map[string]float64 {
	t.Helper()
	raw, err := bed.Clientset.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("reading the API server's metrics: %v", err)
	}
	out := map[string]float64{}
	for line := range strings.SplitSeq(string(raw), "\n") {
		m := requestTotal.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		labels := map[string]string{}
		for kv := range strings.SplitSeq(m[1], ",") {
			k, v, _ := strings.Cut(kv, "=")
			labels[k] = strings.Trim(v, `"`)
		}
		switch labels["verb"] {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY":
		default:
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		key := labels["verb"] + " " + labels["resource"]
		if labels["subresource"] != "" {
			key += "/" + labels["subresource"]
		}
		out[key] += v
	}
	return out
}

// diffWrites is after less before, leaving out what did not change.
func diffWrites(before, after map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}
