package kubebed_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/kubebed/bedpod"
)

// Sizes of testWarmPoolClaims: the pool, and how many claims it times.
const (
	poolSize = 3
	claims   = 20
)

// TestBed starts one bed for the tests that need it: the start costs
// seconds.
func TestBed(t *testing.T) {
	bed := kubebed.Start(t, bedpod.Stub)
	t.Run("install", func(t *testing.T) { testInstall(t, bed) })
	t.Run("router rbac", func(t *testing.T) { testRouterRBAC(t, bed) })
	t.Run("pod security", func(t *testing.T) { testPodSecurity(t, bed) })
	t.Run("pod exit", func(t *testing.T) { testPodExit(t, bed) })
	t.Run("warm pool claims", func(t *testing.T) { testWarmPoolClaims(t, bed) })
}

// testWarmPoolClaims runs the bed end to end: a SandboxTemplate and a
// SandboxWarmPool make the controller create Pods, the simulated kubelet
// runs them, and each SandboxClaim binds a warm Pod whose process answers
// on the claim's Pod IP; deleting a claim stops its Pod's process. It logs
// claim-to-Ready latency, p50 and max over the claims, each made against a
// full pool: the baseline of issue 23's claim targets (docs/kubernetes.md).
func testWarmPoolClaims(t *testing.T, bed *kubebed.Bed) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	createPool(ctx, t, bed)
	waitPoolReady(ctx, t, bed)
	var lat []time.Duration
	for i := range claims {
		name := fmt.Sprintf("claim-%d", i)
		d, claim := timeClaim(ctx, t, bed, name)
		lat = append(lat, d)
		checkClaimedPod(ctx, t, bed, claim)
		deleteClaim(ctx, t, bed, name)
		waitPoolReady(ctx, t, bed)
	}
	slices.Sort(lat)
	t.Logf("claim -> Ready over %d claims from a warm pool of %d: p50 %v, min %v, max %v (too few claims for a p99)",
		claims, poolSize, lat[len(lat)/2], lat[0], lat[len(lat)-1])
	bedpod.WaitFor(t, "the deleted claims' Pods to stop", func() bool { return bed.Kubelet.Running() == poolSize })
}

// createPool makes the template (a stub container on port 8080) and the
// warm pool.
func createPool(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	t.Helper()
	tmpl := &extv1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "stub", Namespace: "default"},
		Spec: extv1.SandboxTemplateSpec{SandboxBlueprint: sandboxv1.SandboxBlueprint{PodTemplate: sandboxv1.PodTemplate{
			Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "stub", Image: "warden.invalid/stub",
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}}},
		}}},
	}
	if err := bed.Extensions.Post().Namespace("default").Resource("sandboxtemplates").Body(tmpl).Do(ctx).Error(); err != nil {
		t.Fatalf("creating the SandboxTemplate: %v", err)
	}
	pool := &extv1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Name: "stub", Namespace: "default"},
		Spec:       extv1.SandboxWarmPoolSpec{Replicas: new(int32(poolSize)), TemplateRef: extv1.SandboxTemplateRef{Name: "stub"}},
	}
	if err := bed.Extensions.Post().Namespace("default").Resource("sandboxwarmpools").Body(pool).Do(ctx).Error(); err != nil {
		t.Fatalf("creating the SandboxWarmPool: %v", err)
	}
}

// waitPoolReady waits until the pool reports all its sandboxes ready.
func waitPoolReady(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	t.Helper()
	var pool extv1.SandboxWarmPool
	bedpod.WaitFor(t, "the warm pool to be full and ready", func() bool {
		err := bed.Extensions.Get().Namespace("default").Resource("sandboxwarmpools").Name("stub").Do(ctx).Into(&pool)
		return err == nil && pool.Status.ReadyReplicas == poolSize
	})
}

// timeClaim creates a claim on the pool and returns the time from its
// creation until a watch sees it Ready, and the claim as then seen. The
// watch starts at resource version "0" (the API server's cache as it is):
// without one, the server waits for its cache to catch up with etcd's
// newest revision, which etcd 3.4 before 3.4.31 cannot report unless the
// watched resource changes, and the watch fails "Too large resource
// version".
func timeClaim(ctx context.Context, t *testing.T, bed *kubebed.Bed, name string) (time.Duration, *extv1.SandboxClaim) {
	t.Helper()
	w, err := bed.Dynamic.Resource(extv1.GroupVersion.WithResource("sandboxclaims")).Namespace("default").
		Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: "0"})
	if err != nil {
		t.Fatalf("watching claim %s: %v", name, err)
	}
	defer w.Stop()
	claim := &extv1.SandboxClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       extv1.SandboxClaimSpec{WarmPoolRef: extv1.SandboxWarmPoolRef{Name: "stub"}},
	}
	start := time.Now()
	if err := bed.Extensions.Post().Namespace("default").Resource("sandboxclaims").Body(claim).Do(ctx).Error(); err != nil {
		t.Fatalf("creating claim %s: %v", name, err)
	}
	timeout := time.After(bedpod.WaitLong)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatalf("the watch of claim %s ended before it was Ready", name)
			}
			u, isObject := ev.Object.(*unstructured.Unstructured)
			if ev.Type == watch.Error || !isObject {
				t.Fatalf("watching claim %s: %v", name, ev.Object)
			}
			var c extv1.SandboxClaim
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &c); err != nil {
				t.Fatalf("decoding claim %s: %v", name, err)
			}
			if apimeta.IsStatusConditionTrue(c.Status.Conditions, "Ready") {
				return time.Since(start), &c
			}
		case <-timeout:
			t.Fatalf("claim %s was not Ready within %v; the controller's log ends:\n%s", name, bedpod.WaitLong, bed.Log("agent-sandbox-controller"))
		}
	}
}

// checkClaimedPod checks that the claim took a warm sandbox (not one made
// for it) and that its Pod IP reaches that sandbox's Pod's process.
func checkClaimedPod(ctx context.Context, t *testing.T, bed *kubebed.Bed, claim *extv1.SandboxClaim) {
	t.Helper()
	sb := claim.Status.SandboxStatus
	if sb.Name == "" || sb.Name == claim.Name || len(sb.PodIPs) != 1 {
		t.Fatalf("claim %s's sandbox status is %+v, want a warm pool sandbox's name and one Pod IP", claim.Name, sb)
	}
	got := bedpod.Get(ctx, t, "http://"+sb.PodIPs[0]+":8080/")
	pod, err := bed.Clientset.CoreV1().Pods("default").Get(ctx, got, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the process on claim %s's Pod IP %s says it is Pod %q: %v", claim.Name, sb.PodIPs[0], got, err)
	}
	if pod.Status.PodIP != sb.PodIPs[0] || pod.Status.Phase != corev1.PodRunning {
		t.Errorf("Pod %s: IP %s, phase %s; want the claim's IP %s, Running", pod.Name, pod.Status.PodIP, pod.Status.Phase, sb.PodIPs[0])
	}
}

// deleteClaim deletes a claim; its sandbox and Pod go with it.
func deleteClaim(ctx context.Context, t *testing.T, bed *kubebed.Bed, name string) {
	t.Helper()
	if err := bed.Extensions.Delete().Namespace("default").Resource("sandboxclaims").Name(name).Do(ctx).Error(); err != nil {
		t.Fatalf("deleting claim %s: %v", name, err)
	}
}
