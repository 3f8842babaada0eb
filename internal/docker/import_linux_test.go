package docker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestRealImportFailureIsReported has this host's engine import a tar
// that is not one, fetched from a loopback server: the engine answers 200,
// streams its progress, and only then reports the failure.
func TestRealImportFailureIsReported(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		testhost.SkipOrFail(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Ping(ctx); err != nil {
		testhost.SkipOrFail(t, fmt.Sprintf("no Docker engine (make dockerd starts one): %v", err))
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(strings.Repeat("not a tar ", 300)))
	}))
	defer srv.Close()
	q := url.Values{"fromSrc": {srv.URL + "/bad.tar"}, "repo": {"warden-test-bad-import"}, "tag": {"x"}}
	err = e.createImage(ctx, q, nil)
	if err == nil || !strings.Contains(err.Error(), "tar") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("importing a tar that is not one: got %v, want one line naming the tar error", err)
	}
	if ok, err := e.HasImage(ctx, "warden-test-bad-import:x"); err != nil || ok {
		t.Errorf("after the failed import: HasImage = %v, %v; want false, nil", ok, err)
	}
	t.Logf("the engine said: %v", err)
}
