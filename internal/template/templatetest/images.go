package templatetest

import (
	"context"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// built memoises Build within one test binary.
var built struct {
	once sync.Once
	dir  string
	err  error
}

// testLog passes the build's output to a test's log, line by line.
type testLog struct{ t testing.TB }

func (l testLog) Write(p []byte) (int, error) {
	l.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// buildDir returns the cache's build directory, building it once per test
// binary, or skips t (fails it under WARDEN_CI=1) when it cannot be built.
func buildDir(t testing.TB) string {
	t.Helper()
	built.once.Do(func() {
		built.dir, built.err = Build(context.Background(), testLog{t})
	})
	if built.err != nil {
		testhost.SkipOrFail(t, "no test images: "+built.err.Error())
	}
	return built.dir
}

// Image returns image name as an OCI layout directory and a docker-save
// tarball (tagged Tag(name)), building the cached images when needed.
// Tests must not change either: they are shared.
func Image(t testing.TB, imageName string) (layoutDir, tarPath string) {
	t.Helper()
	if _, err := find(imageName); err != nil {
		t.Fatal(err)
	}
	p := pathsIn(buildDir(t), imageName)
	return p.Layout, p.Tar
}

// Registry starts an in-process registry on loopback, stopped when t ends,
// pushes the named images to it (all of them when names is empty) and
// returns each image's reference by name (HOST:PORT/warden-test/NAME:latest).
func Registry(t testing.TB, names ...string) map[string]string {
	t.Helper()
	if len(names) == 0 {
		names = Names()
	}
	dir := buildDir(t)
	srv := httptest.NewServer(registry.New(registry.Logger(discardLogger())))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	refs := map[string]string{}
	for _, n := range names {
		if _, err := find(n); err != nil {
			t.Fatal(err)
		}
		img, err := load(pathsIn(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		ref, err := name.NewTag(host+"/"+Tag(n), name.Insecure)
		if err != nil {
			t.Fatalf("naming %s: %v", n, err)
		}
		if err := remote.Write(ref, img, remote.WithContext(t.Context())); err != nil {
			t.Fatalf("pushing %s to the test registry: %v", n, err)
		}
		refs[n] = ref.String()
	}
	return refs
}
