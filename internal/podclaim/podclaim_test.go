package podclaim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// testKey is the tests' router key.
var testKey = bytes.Repeat([]byte{0x6b}, podinit.MinRouterKey)

// goodRequest is a request check accepts.
func goodRequest() Request {
	return Request{Session: "s-1", Owner: "acme", Template: "default", TTL: time.Hour, IdleTimeout: 10 * time.Minute, Limits: spec.DefaultLimits}
}

func TestRequestCheck(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Request)
		want   string // "" for no error, else a part of it
	}{
		{"good", func(*Request) {}, ""},
		{"no session", func(r *Request) { r.Session = "" }, "session id is empty"},
		{"session with a space", func(r *Request) { r.Session = "a b" }, `session id "a b" has ' '`},
		{"session too long", func(r *Request) { r.Session = strings.Repeat("a", 129) }, "over 128 bytes"},
		{"session ending in '-'", func(r *Request) { r.Session = "ses_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA-" }, ""},
		{"session ending in '_'", func(r *Request) { r.Session = "ses_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA_" }, ""},
		{"limits out of range", func(r *Request) { r.Limits.Pids = -1 }, "limits: invalid"},
		{"limits left zero", func(r *Request) { r.Limits = spec.Limits{} }, "limits: invalid"},
		{"owner selector injection", func(r *Request) { r.Owner = "a,b=c" }, `owner "a,b=c"`},
		{"template with capitals", func(r *Request) { r.Template = "Default" }, "cannot name a SandboxWarmPool"},
		{"no TTL", func(r *Request) { r.TTL = 0 }, "TTL 0s is not positive"},
		{"idle over TTL", func(r *Request) { r.IdleTimeout = 2 * time.Hour }, "at most the TTL"},
		{"no idle timeout", func(r *Request) { r.IdleTimeout = 0 }, "must be positive"},
	}
	for _, tt := range tests {
		r := goodRequest()
		tt.change(&r)
		err := r.check()
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

func TestClaimName(t *testing.T) {
	a, b := ClaimName("Session-1"), ClaimName("session-1")
	if a == b {
		t.Errorf("ClaimName gives %q for ids differing in case", a)
	}
	if got := ClaimName("Session-1"); got != a {
		t.Errorf("ClaimName is not stable: got %q, then %q", a, got)
	}
	if errs := validation.IsDNS1123Label(a); len(errs) != 0 {
		t.Errorf("ClaimName %q is not a DNS label: %v", a, errs)
	}
}

// claimOf is the claim newClaim makes for r, as the API server would
// return it once the claiming replica recorded its Pod and network
// policy (sealed with testKey).
func claimOf(t *testing.T, r Request, now time.Time) *extv1.SandboxClaim {
	t.Helper()
	c, err := newClaim("ns", &r, now)
	if err != nil {
		t.Fatal(err)
	}
	c.UID = "claim-uid"
	if c.Annotations[NetworkAnnotation], err = sealNetwork(testKey, c.UID, r.Session, r.Network); err != nil {
		t.Fatal(err)
	}
	c.Annotations[PodAnnotation] = "pod-a/uid-a"
	c.Annotations[ReadyAnnotation] = now.Format(time.RFC3339Nano)
	c.Status.SandboxStatus = extv1.SandboxStatus{Name: "pod-a", PodIPs: []string{"10.0.0.7"}}
	return c
}

func TestSessionOf(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	tests := []struct {
		name   string
		change func(*extv1.SandboxClaim)
		want   string
	}{
		{"as made", func(*extv1.SandboxClaim) {}, ""},
		{"another session's id", func(c *extv1.SandboxClaim) { c.Annotations[SessionAnnotation] = "s-2" }, "do not name it"},
		{"another session's label", func(c *extv1.SandboxClaim) { c.Labels[SessionLabel] = ClaimName("s-2") }, "do not name it"},
		{"limits left zero", func(c *extv1.SandboxClaim) { c.Annotations[LimitsAnnotation] = `{}` }, "invalid"},
		{"limits out of range", func(c *extv1.SandboxClaim) {
			c.Annotations[LimitsAnnotation] = `{"Timeout":8640000000000000,"Pids":-1}`
		}, "invalid"},
		{"idle not a duration", func(c *extv1.SandboxClaim) { c.Annotations[IdleAnnotation] = "soon" }, "not a positive duration"},
		{"idle negative", func(c *extv1.SandboxClaim) { c.Annotations[IdleAnnotation] = "-1s" }, "not a positive duration"},
		{"activity not a time", func(c *extv1.SandboxClaim) { c.Annotations[ActiveAnnotation] = "now" }, ActiveAnnotation},
		{"limits with an unknown field", func(c *extv1.SandboxClaim) { c.Annotations[LimitsAnnotation] = `{"Root":true}` }, "unknown field"},
		{"pod without uid", func(c *extv1.SandboxClaim) { c.Annotations[PodAnnotation] = "pod-a/" }, "not name/uid"},
		{"not yet recorded", func(c *extv1.SandboxClaim) { delete(c.Annotations, PodAnnotation) }, ""},
		{"id no session could have", func(c *extv1.SandboxClaim) {
			id := "s-\x1b[31m" + strings.Repeat("a", maxIDLen)
			c.Annotations[SessionAnnotation], c.Name, c.Labels[SessionLabel] = id, ClaimName(id), ClaimName(id)
		}, "session id"},
	}
	for _, tt := range tests {
		c := claimOf(t, goodRequest(), now)
		tt.change(c)
		s, err := sessionOf(c)
		if (err == nil) != (tt.want == "") || (err != nil && !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: got %v, want an error containing %q", tt.name, err, tt.want)
		}
		if tt.name == "as made" && (s.Pod != "pod-a" || s.PodUID != "uid-a" || s.Limits != spec.DefaultLimits ||
			!s.LastActive.Equal(now) || !s.Expires.Equal(now.Add(time.Hour)) || s.PodIP.String() != "10.0.0.7" || s.Releasing) {
			t.Errorf("as made: got %+v, want Pod pod-a/uid-a, the default limits, active at %v, expiring an hour later, not releasing", s, now)
		}
	}
	c := claimOf(t, goodRequest(), now)
	c.DeletionTimestamp = &metav1.Time{Time: now}
	if s, err := sessionOf(c); err != nil || !s.Releasing {
		t.Errorf("a claim being deleted: got %+v, %v; want Releasing", s, err)
	}
}

// pod is a Pod named pod-a with uid and phase.
func pod(uid string, phase corev1.PodPhase) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-a", UID: ktypes.UID("uid-" + uid)}, Status: corev1.PodStatus{Phase: phase}}
}

func TestPodDeath(t *testing.T) {
	s := &Session{Pod: "pod-a", PodUID: "uid-a"}
	failed := pod("a", corev1.PodFailed)
	failed.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "sandbox", State: corev1.ContainerState{
		Terminated: &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error", Message: "planted\nby the sandbox"},
	}}}
	deleting := pod("a", corev1.PodRunning)
	deleting.DeletionTimestamp = &metav1.Time{}
	tests := []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"running", pod("a", corev1.PodRunning), ""},
		{"gone", nil, "its Pod pod-a was deleted"},
		{"replaced", pod("b", corev1.PodRunning), "replaced by another"},
		{"deleting", deleting, "is being deleted"},
		{"failed", failed, `its Pod pod-a failed: container sandbox exited 3 ("Error")`},
		{"succeeded", pod("a", corev1.PodSucceeded), "ended: no container reports how"},
	}
	for _, tt := range tests {
		got := podDeath(s, tt.pod)
		if tt.pod != nil {
			if slim := podDeath(s, slimPod(tt.pod)); slim != got {
				t.Errorf("%s: a slimmed Pod: got %q, want %q as of the whole Pod", tt.name, slim, got)
			}
			if m := slimPod(tt.pod).Status.ContainerStatuses; len(m) > 0 && m[0].State.Terminated.Message != "" {
				t.Errorf("%s: a slimmed Pod keeps the termination message %q, want it dropped", tt.name, m[0].State.Terminated.Message)
			}
		}
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) || strings.Contains(got, "\n") || strings.Contains(got, "planted") {
			t.Errorf("%s: got %q, want one line containing %q and nothing the sandbox wrote", tt.name, got, tt.want)
		}
	}
}

func TestReapDecision(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	const interval = 30 * time.Second
	live := map[string]*corev1.Pod{"pod-a": pod("a", corev1.PodRunning)}
	base := Session{Pod: "pod-a", PodUID: "uid-a", IdleTimeout: time.Minute, LastActive: now.Add(-time.Minute), Expires: now.Add(time.Hour)}
	tests := []struct {
		name   string
		change func(*Session)
		pods   map[string]*corev1.Pod
		want   string
	}{
		{"idle for exactly the timeout", func(*Session) {}, live, ""},
		{"idle within the interval's grace", func(s *Session) { s.LastActive = now.Add(-time.Minute - interval) }, live, ""},
		{"idle past the grace", func(s *Session) { s.LastActive = now.Add(-2 * time.Minute) }, live, "idle for 2m0s (timeout 1m0s)"},
		{"TTL ended", func(s *Session) { s.Expires = now }, live, "TTL ended"},
		{"Pod deleted", func(*Session) {}, nil, "was deleted"},
		{"still being claimed, Pod unknown", func(s *Session) { s.PodUID = "" }, nil, ""},
	}
	for _, tt := range tests {
		s := base
		tt.change(&s)
		got := reapDecision(&s, tt.pods, now, interval)
		if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

// TestTouchWritesOncePerInterval counts the PATCHes that many Touches
// send to a stand-in API server: one per session per interval, however
// many execs, and a failed write is retried by the next Touch.
func TestTouchWritesOncePerInterval(t *testing.T) {
	var mu sync.Mutex
	patches := map[string]int{}
	fail := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.Method != http.MethodPatch {
			http.Error(w, "unexpected "+r.Method, http.StatusBadRequest)
			return
		}
		patches[r.URL.Path]++
		if strings.HasSuffix(r.URL.Path, ClaimName("replaced")) {
			refuseUID(w)
			return
		}
		if strings.HasSuffix(r.URL.Path, ClaimName("flaky")) && fail {
			fail = false
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"apiVersion": extv1.GroupVersion.String(), "kind": "SandboxClaim"})
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL}, Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Hour, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ses := func(id string) *Session {
		return &Session{ID: id, Claim: ClaimName(id), claimUID: ktypes.UID("uid-" + id)}
	}
	for range 100 {
		for _, id := range []string{"a", "b"} {
			if err := c.Touch(ctx, ses(id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := c.Touch(ctx, ses("replaced")); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a Touch of a claim replaced under its name: got %v, want ErrNotFound", err)
	}
	if err := c.Touch(ctx, ses("flaky")); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("a Touch the server refused: got %v, want its error", err)
	}
	if err := c.Touch(ctx, ses("flaky")); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range []string{"a", "b"} {
		if got := patches["/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims/"+ClaimName(id)]; got != 1 {
			t.Errorf("session %s: %d activity writes for 100 Touches in one interval, want 1", id, got)
		}
	}
	if got := patches["/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims/"+ClaimName("flaky")]; got != 2 {
		t.Errorf("a failed activity write: %d writes for 2 Touches, want 2 (the failure retried)", got)
	}
}

// TestSweepOncePerInterval checks that the table of activity writes is
// swept when it grows past sweepAt, but at most once per interval, so a
// table of many live sessions is not scanned on every Touch.
func TestSweepOncePerInterval(t *testing.T) {
	const interval = time.Minute
	t0 := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	c := &Claimer{cfg: Config{ActivityInterval: interval}, written: map[string]time.Time{}}
	fill := func(at time.Time) {
		for i := range sweepAt + 1 {
			c.written[fmt.Sprintf("%v-%d", at, i)] = at
		}
	}
	fill(t0)
	if !c.due("a", t0.Add(2*interval)) {
		t.Fatal("a first write: got not due, want due")
	}
	if got := len(c.written); got != 1 {
		t.Errorf("after the first sweep: got %d entries, want 1 (the stale ones dropped)", got)
	}
	fill(t0.Add(interval))
	c.due("b", t0.Add(2*interval+time.Second))
	if got, want := len(c.written), sweepAt+3; got != want {
		t.Errorf("a second write within the interval: got %d entries, want %d (no second sweep)", got, want)
	}
	c.due("c", t0.Add(3*interval))
	if got := len(c.written); got != 2 {
		t.Errorf("a write an interval later: got %d entries, want 2 (swept again: b and c)", got)
	}
}

// TestForeignPod: Find attaches only to a Pod controlled by the claim's
// Sandbox (named by the controller-written status) and labelled a
// sandbox, whatever the claim's writable annotation names.
func TestForeignPod(t *testing.T) {
	s := &Session{Pod: "pod-a", PodUID: "uid-a", Sandbox: "box-a"}
	own := func(kind, name string, labelled bool) *corev1.Pod {
		p := pod("a", corev1.PodRunning)
		yes := true
		if kind != "" {
			p.OwnerReferences = []metav1.OwnerReference{{Kind: kind, Name: name, Controller: &yes}}
		}
		if labelled {
			p.Labels = map[string]string{sandboxLabel: sandboxComponent}
		}
		return p
	}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		want string
	}{
		{"the claim's sandbox Pod", own("Sandbox", "box-a", true), ""},
		{"no controller", own("", "", true), `not controlled by the claim's Sandbox "box-a"`},
		{"another Sandbox's", own("Sandbox", "box-b", true), `not controlled by the claim's Sandbox "box-a"`},
		{"another kind's", own("ReplicaSet", "box-a", true), `not controlled by the claim's Sandbox "box-a"`},
		{"unlabelled", own("Sandbox", "box-a", false), "has no label " + sandboxSelector},
	} {
		got := foreignPod(s, c.pod)
		if (got == "") != (c.want == "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}
