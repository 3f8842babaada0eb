package podclaim

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ktypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	sandboxv1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/spec"
)

// standIn is a stand-in API server holding Sandboxes and Pods by name,
// answering a claim PATCH with the claim it was given, annotations
// applied, and keeping the PATCH bodies.
type standIn struct {
	mu       sync.Mutex
	objects  map[string]runtime.Object // by "sandboxes/name" or "pods/name"
	claim    *extv1.SandboxClaim
	patches  []map[string]any
	replaced int // PATCHes to refuse first, as a real server refuses a changed metadata.uid
}

func (s *standIn) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	key := path.Base(path.Dir(r.URL.Path)) + "/" + path.Base(r.URL.Path)
	switch {
	case r.Method == http.MethodGet && s.objects[key] != nil:
		_ = json.NewEncoder(w).Encode(s.objects[key])
	case r.Method == http.MethodPatch && strings.Contains(key, "sandboxclaims/"):
		body, _ := io.ReadAll(r.Body)
		var p struct {
			Metadata struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"metadata"`
		}
		var raw map[string]any
		if json.Unmarshal(body, &p) != nil || json.Unmarshal(body, &raw) != nil {
			http.Error(w, "bad patch", http.StatusBadRequest)
			return
		}
		s.patches = append(s.patches, raw)
		if s.replaced > 0 {
			s.replaced--
			refuseUID(w)
			return
		}
		out := s.claim.DeepCopy()
		for k, v := range p.Metadata.Annotations {
			out.Annotations[k] = v
		}
		_ = json.NewEncoder(w).Encode(out)
	default:
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`, http.StatusNotFound)
	}
}

// refuseUID answers a merge patch whose metadata.uid is not the claim's
// as a real API server does: with no UID precondition in a PATCH, the
// changed uid fails validation (it is immutable), a 422 Invalid.
func refuseUID(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnprocessableEntity)
	_ = json.NewEncoder(w).Encode(&metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
		Status: metav1.StatusFailure, Reason: metav1.StatusReasonInvalid, Code: http.StatusUnprocessableEntity,
		Message: `SandboxClaim.extensions.agents.x-k8s.io "c" is invalid: metadata.uid: Invalid value: "x": field is immutable`,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
			Type: metav1.CauseTypeFieldValueInvalid, Field: "metadata.uid", Message: "Invalid value: \"x\": field is immutable",
		}}}})
}

// readyClaim is session id's claim with uid, Ready on Sandbox box at 10.0.0.7.
func readyClaim(t *testing.T, id, uid, box string) *extv1.SandboxClaim {
	t.Helper()
	r := goodRequest()
	r.Session = id
	c, err := newClaim("ns", &r, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.UID, c.ResourceVersion = ktypes.UID(uid), "rv-"+uid
	c.Status.SandboxStatus = extv1.SandboxStatus{Name: box, PodIPs: []string{"10.0.0.7"}}
	c.Status.Conditions = []metav1.Condition{{Type: readyCondition, Status: metav1.ConditionTrue, Reason: "Ready"}}
	return c
}

// boxAndPod are Sandbox box controlled by claim uid, and its Pod.
func boxAndPod(box, claimUID string) (*sandboxv1.Sandbox, *corev1.Pod) {
	yes := true
	b := &sandboxv1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: sandboxv1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{Name: box, UID: ktypes.UID("box-" + box), OwnerReferences: []metav1.OwnerReference{
			{Kind: "SandboxClaim", Name: "c", UID: ktypes.UID(claimUID), Controller: &yes},
		}},
	}
	p := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: box, UID: ktypes.UID("pod-" + box), Labels: map[string]string{sandboxLabel: sandboxComponent},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Sandbox", Name: box, UID: b.UID, Controller: &yes}}},
		Status: corev1.PodStatus{PodIP: "10.0.0.7", Phase: corev1.PodRunning},
	}
	return b, p
}

// TestAwaitPodOwnClaimOnly feeds awaitPod, through a fake watch, events
// of an earlier claim of the same name (as a watch cache may replay
// them) before the created claim's: only the created claim's Pod may be
// recorded, by a patch conditional on its UID (not its resource
// version: session.go's record says why); a
// Sandbox another claim controls, a Pod being deleted, or one without
// the sandbox label Find requires, is refused.
func TestAwaitPodOwnClaimOnly(t *testing.T) {
	tests := []struct {
		name    string
		before  []watch.EventType // events of the old claim, sent first
		change  func(*sandboxv1.Sandbox, *corev1.Pod)
		wantErr string
		// misconfigured: the error is the cluster's setup, told the
		// tenant only by its public line.
		misconfigured bool
	}{
		{"old claim Ready first", []watch.EventType{watch.Added}, nil, "", false},
		{"old claim deleted first", []watch.EventType{watch.Modified, watch.Deleted}, nil, "", false},
		{"Sandbox of another claim", nil, func(b *sandboxv1.Sandbox, _ *corev1.Pod) { b.OwnerReferences[0].UID = "claim-old" }, "is not controlled by claim", true},
		{"Pod being deleted", nil, func(_ *sandboxv1.Sandbox, p *corev1.Pod) { now := metav1.Now(); p.DeletionTimestamp = &now }, "is being deleted", false},
		{"Pod without the sandbox label", nil, func(_ *sandboxv1.Sandbox, p *corev1.Pod) { p.Labels = nil }, `template "default"'s Pod new-box has no label ` + sandboxSelector, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, created := readyClaim(t, "s-1", "claim-old", "old-box"), readyClaim(t, "s-1", "claim-new", "new-box")
			oldBox, oldPod := boxAndPod("old-box", "claim-old")
			newBox, newPod := boxAndPod("new-box", "claim-new")
			if tt.change != nil {
				tt.change(newBox, newPod)
			}
			srv := &standIn{claim: created, objects: map[string]runtime.Object{
				"sandboxes/old-box": oldBox, "pods/old-box": oldPod, "sandboxes/new-box": newBox, "pods/new-box": newPod,
			}}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			c, err := New(&rest.Config{Host: hs.URL}, Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Hour, ReadyTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			w := watch.NewFakeWithChanSize(len(tt.before)+1, false)
			for _, ev := range tt.before {
				w.Action(ev, old.DeepCopy())
			}
			// The watched claim's session annotation is one a claim
			// editor may have rewritten: the seal is for the request's.
			edited := created.DeepCopy()
			edited.Annotations[SessionAnnotation] = "s-2"
			w.Add(edited)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			proxy := spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"example.com"}}
			s, err := c.awaitPod(ctx, w, created, "s-1", proxy)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				var mis *MisconfiguredError
				if ok := errors.As(err, &mis); ok != tt.misconfigured || ok && (strings.Contains(mis.Public(), "new-box") || strings.Contains(mis.Public(), sandboxSelector)) {
					t.Errorf("got %v (misconfigured: %v), want misconfigured %v with a public line naming no Pod or selector", err, ok, tt.misconfigured)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.Pod != "new-box" || s.PodUID != "pod-new-box" {
				t.Errorf("got Pod %s/%s, want new-box/pod-new-box (the created claim's)", s.Pod, s.PodUID)
			}
			if len(srv.patches) != 1 {
				t.Fatalf("got %d patches, want 1", len(srv.patches))
			}
			meta, _ := srv.patches[0]["metadata"].(map[string]any)
			if rv, has := meta["resourceVersion"]; meta["uid"] != "claim-new" || has {
				t.Errorf("the record patch's metadata: got uid %v, resourceVersion %v; want uid claim-new and no resource version", meta["uid"], rv)
			}
			notes, _ := meta["annotations"].(map[string]any)
			v, _ := notes[NetworkAnnotation].(string)
			if n, err := openNetwork(testKey, "claim-new", "s-1", v); err != nil || s.Network.Mode != spec.NetProxy || n.Mode != spec.NetProxy {
				t.Errorf("the record patch's network %q opens to %+v, %v, and the session has %+v; want the policy given, sealed for the claim", v, n, err, s.Network)
			}
		})
	}
}

// TestRecordOnePatch checks that the record is one patch whatever the
// controller did to the claim since its Ready event: a 409 (the UID
// precondition failed, another claim of the same name) is an error
// without a retry, and so is a patched claim that names another Sandbox
// than the one whose ownership was checked.
func TestRecordOnePatch(t *testing.T) {
	tests := []struct {
		name      string
		replaced  int
		patchedOn string // the Sandbox the patched claim names
		wantErr   string
	}{
		{"claim updated since", 0, "new-box", ""},
		{"claim replaced", 1, "new-box", "replaced by another of the same name"},
		{"claim moved", 0, "other-box", "moved from Sandbox new-box"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			created := readyClaim(t, "s-1", "claim-new", "new-box")
			patched := readyClaim(t, "s-1", "claim-new", tt.patchedOn)
			patched.ResourceVersion = "rv-after-the-controller"
			patched.TypeMeta = metav1.TypeMeta{APIVersion: extv1.GroupVersion.String(), Kind: "SandboxClaim"}
			box, pod := boxAndPod("new-box", "claim-new")
			srv := &standIn{claim: patched, replaced: tt.replaced, objects: map[string]runtime.Object{
				"sandboxes/new-box": box, "pods/new-box": pod,
			}}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			c, err := New(&rest.Config{Host: hs.URL}, Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Hour, ReadyTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			s, err := c.record(context.Background(), created, "s-1", spec.NetworkPolicy{})
			if len(srv.patches) != 1 {
				t.Errorf("got %d patches, want 1", len(srv.patches))
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got %v, want an error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s.PodUID != "pod-new-box" {
				t.Errorf("got Pod UID %s, want pod-new-box", s.PodUID)
			}
		})
	}
}

// TestClaimPodByAnnotation checks a Sandbox whose pod-name annotation
// names another Pod than itself (a legacy adoption): the Pod read named
// as the Sandbox is not taken, the annotation's is.
func TestClaimPodByAnnotation(t *testing.T) {
	created := readyClaim(t, "s-1", "claim-new", "new-box")
	box, _ := boxAndPod("new-box", "claim-new")
	box.Annotations = map[string]string{sandboxv1.SandboxPodNameAnnotation: "legacy-pod"}
	_, pod := boxAndPod("legacy-pod", "claim-new")
	pod.OwnerReferences[0].UID = box.UID
	srv := &standIn{claim: created, objects: map[string]runtime.Object{"sandboxes/new-box": box, "pods/legacy-pod": pod}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	c, err := New(&rest.Config{Host: hs.URL}, Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Hour, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.claimPod(context.Background(), created)
	if err != nil || got.Name != "legacy-pod" {
		t.Fatalf("got %v, %v; want Pod legacy-pod", got, err)
	}
}

// TestRewatchCapped checks that a watch the server keeps ending is not
// opened again past maxRewatch: the claim's wait fails, asking for the
// API server's health, without another request.
func TestRewatchCapped(t *testing.T) {
	c := &Claimer{}
	n := maxRewatch
	_, err := c.rewatch(context.Background(), readyClaim(t, "s-1", "claim-new", "new-box"), &n)
	if err == nil || !strings.Contains(err.Error(), "ended 10 watches") {
		t.Errorf("got %v, want an error saying the server ended 10 watches", err)
	}
}

// TestUnrecorded checks Find's answer for a claim with no Pod recorded:
// pending while its claiming replica may still record it, dead once the
// claim is older than the ready timeout; none once its Pod is recorded.
func TestUnrecorded(t *testing.T) {
	c := &Claimer{cfg: Config{ReadyTimeout: time.Minute}}
	tests := []struct {
		name string
		age  time.Duration
		want error
	}{
		{"young", time.Second, ErrPending},
		{"older than the ready timeout", 2 * time.Minute, ErrDead},
	}
	for _, tt := range tests {
		err := c.Unrecorded(&Session{ID: "s-1", Claim: ClaimName("s-1"), Created: time.Now().Add(-tt.age)})
		if !errors.Is(err, tt.want) {
			t.Errorf("%s: got %v, want %v", tt.name, err, tt.want)
		}
	}
	if err := c.Unrecorded(&Session{ID: "s-1", Pod: "p", PodUID: "u", Created: time.Now().Add(-time.Hour)}); err != nil {
		t.Errorf("recorded: got %v, want nil", err)
	}
}

// TestHoldOnlyWhenChanged: Hold writes the holder unless there is none
// to record and the claim, as read, recorded none; its own address as
// read is written again (another replica may have recorded itself since
// the read).
func TestHoldOnlyWhenChanged(t *testing.T) {
	tests := []struct {
		name, mine, recorded string
		patches              int
	}{
		{"this replica as read", "10.0.0.7:8080/p", "10.0.0.7:8080/p", 1},
		{"none to record, none recorded", "", "", 0},
		{"another replica recorded", "10.0.0.7:8080/p", "10.0.0.8:8080/q", 1},
		{"none recorded", "10.0.0.7:8080/p", "", 1},
		{"one to remove", "", "10.0.0.8:8080/q", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := &standIn{claim: readyClaim(t, "s-1", "claim-new", "new-box")}
			hs := httptest.NewServer(srv)
			defer hs.Close()
			cfg := Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Hour, ReadyTimeout: time.Minute}
			if tt.mine != "" {
				cfg.Holder = func(ktypes.UID) string { return tt.mine }
			}
			c, err := New(&rest.Config{Host: hs.URL}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			s := &Session{ID: "s-1", Claim: ClaimName("s-1"), Holder: tt.recorded, claimUID: "claim-new"}
			if err := c.Hold(context.Background(), s); err != nil {
				t.Fatal(err)
			}
			if len(srv.patches) != tt.patches || s.Holder != tt.mine {
				t.Errorf("got %d patches and holder %q, want %d and %q", len(srv.patches), s.Holder, tt.patches, tt.mine)
			}
		})
	}
}
