package podclaim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// TestReapPreconditions has Reap delete an idle claim through a
// stand-in API server: the DELETE must carry the listed claim's UID and
// resource version as preconditions, so a claim replaced or touched
// since the list is left alone, and the server's 409 for that must count
// as raced, not as an error. The Pods listed must be the sandbox Pods
// only.
func TestReapPreconditions(t *testing.T) {
	tests := []struct {
		name         string
		status       int
		wantReleased int
		wantRaced    int
	}{
		{"unchanged since the list", http.StatusOK, 1, 0},
		{"touched since the list", http.StatusConflict, 0, 1},
		{"deleted since the list", http.StatusNotFound, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			idle := claimOf(t, goodRequest(), time.Now().Add(-time.Hour))
			idle.UID, idle.ResourceVersion = "uid-listed", "rv-listed"
			var mu sync.Mutex
			var deletes []metav1.DeleteOptions
			var podSelector string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims":
					_ = json.NewEncoder(w).Encode(&extv1.SandboxClaimList{
						TypeMeta: metav1.TypeMeta{APIVersion: extv1.GroupVersion.String(), Kind: "SandboxClaimList"},
						Items:    []extv1.SandboxClaim{*idle},
					})
				case r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces/ns/pods":
					podSelector = r.URL.Query().Get("labelSelector")
					_ = json.NewEncoder(w).Encode(&corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"}})
				case r.Method == http.MethodDelete && r.URL.Path == "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/ns/sandboxclaims/"+idle.Name:
					var opts metav1.DeleteOptions
					if err := json.NewDecoder(r.Body).Decode(&opts); err != nil {
						http.Error(w, err.Error(), http.StatusBadRequest)
						return
					}
					deletes = append(deletes, opts)
					w.WriteHeader(tt.status)
					_ = json.NewEncoder(w).Encode(&metav1.Status{
						TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"},
						Status:   map[bool]string{true: metav1.StatusSuccess, false: metav1.StatusFailure}[tt.status == http.StatusOK],
						Code:     int32(tt.status), Reason: map[int]metav1.StatusReason{
							http.StatusOK: "", http.StatusConflict: metav1.StatusReasonConflict, http.StatusNotFound: metav1.StatusReasonNotFound,
						}[tt.status],
					})
				default:
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
				}
			}))
			defer srv.Close()
			c, err := New(&rest.Config{Host: srv.URL}, Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Second, ReadyTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := c.Reap(context.Background())
			if err != nil {
				t.Fatalf("got %v, want no error", err)
			}
			if len(rep.Released) != tt.wantReleased || rep.Raced != tt.wantRaced {
				t.Errorf("got %d released, %d raced; want %d, %d", len(rep.Released), rep.Raced, tt.wantReleased, tt.wantRaced)
			}
			if len(rep.Released) == 1 && rep.Released[0].Session != "s-1" {
				t.Errorf("released session %q, want s-1 (the claim's id annotation)", rep.Released[0].Session)
			}
			mu.Lock()
			defer mu.Unlock()
			if podSelector != sandboxSelector {
				t.Errorf("the Pods listed: got selector %q, want %q", podSelector, sandboxSelector)
			}
			if len(deletes) != 1 {
				t.Fatalf("got %d DELETEs, want 1", len(deletes))
			}
			p := deletes[0].Preconditions
			if p == nil || p.UID == nil || *p.UID != "uid-listed" || p.ResourceVersion == nil || *p.ResourceVersion != "rv-listed" {
				t.Errorf("the DELETE's preconditions: got %+v, want uid-listed and rv-listed", p)
			}
		})
	}
}
