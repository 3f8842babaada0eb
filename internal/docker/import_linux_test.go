package docker

import (
	"archive/tar"
	"bytes"
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

// TestRealImportSucceeds has this host's engine import a small good tar:
// the engine's progress must end with the image's id, which progressError
// requires, or every import would fail.
func TestRealImportSucceeds(t *testing.T) {
	e, err := NewEngine()
	if err != nil {
		testhost.SkipOrFail(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := e.Ping(ctx); err != nil {
		testhost.SkipOrFail(t, fmt.Sprintf("no Docker engine (make dockerd starts one): %v", err))
	}
	var tarball bytes.Buffer
	tw := tar.NewWriter(&tarball)
	if err := tw.WriteHeader(&tar.Header{Name: "f", Mode: 0o644, Size: 3}); err != nil {
		t.Fatal(err)
	}
	_, _ = tw.Write([]byte("hi\n"))
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	const ref = "warden-test-good-import:x"
	if err := e.Import(ctx, "warden-test-good-import", "x", &tarball); err != nil {
		t.Fatalf("importing a good tar: %v", err)
	}
	t.Cleanup(func() {
		if err := e.call(context.Background(), http.MethodDelete, "/images/"+ref, nil, nil, nil); err != nil {
			t.Errorf("removing %s: %v", ref, err)
		}
	})
	if ok, err := e.HasImage(ctx, ref); err != nil || !ok {
		t.Errorf("after the import: HasImage = %v, %v; want true, nil", ok, err)
	}
}
