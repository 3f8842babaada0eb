package podclaim

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// TestListCapped lists one owner's claims from a stand-in API server
// that pages without end, as planted claims could make it: the listing
// must stop past maxOwnerListed with an error, not follow every page.
func TestListCapped(t *testing.T) {
	var mu sync.Mutex
	pages := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pages++
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(&extv1.SandboxClaimList{ // the client is gone if this fails
			TypeMeta: metav1.TypeMeta{APIVersion: extv1.GroupVersion.String(), Kind: "SandboxClaimList"},
			ListMeta: metav1.ListMeta{Continue: "more"},
			Items:    make([]extv1.SandboxClaim, listPage),
		})
	}))
	defer srv.Close()
	c, err := New(&rest.Config{Host: srv.URL}, Config{Namespace: "ns", RouterKey: testKey, ActivityInterval: time.Second, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = c.listClaims(ctx, "owner-a")
	mu.Lock()
	defer mu.Unlock()
	if want := maxOwnerListed/listPage + 1; err == nil || !strings.Contains(err.Error(), "over") || pages != want {
		t.Errorf("an endless listing: got %v after %d pages, want an error after %d", err, pages, want)
	}
}
