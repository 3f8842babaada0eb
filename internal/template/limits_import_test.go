//go:build !slim

package template

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestReusedLayerCharged pulls an image whose 1 MiB layer is already
// stored into a store capped at 64 KiB: a reused layer counts against the
// cap like an unpacked one, so the template's size stays under it.
func TestReusedLayerCharged(t *testing.T) {
	host := serveRegistry(t, nil)
	big := testLayer(t, layerTar(t, file("zeros", strings.Repeat("\x00", 1<<20))))
	push(t, host+"/one:1", testImage(t, big))
	push(t, host+"/two:1", testImage(t, big, testLayer(t, layerTar(t, file("two", "2")))))
	s := openStore(t, Options{})
	if _, err := s.Pull(context.Background(), host+"/one:1", "", PullOptions{}); err != nil {
		t.Fatalf("pulling: %v", err)
	}
	capped, err := Open(s.Dir(), Options{MaxBytes: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	_, err = capped.Pull(context.Background(), host+"/two:1", "", PullOptions{})
	if err == nil || !strings.Contains(err.Error(), "per-pull cap") {
		t.Fatalf("got %v, want the per-pull cap error", err)
	}
}

// TestImportLayoutArchiveOneBudget imports a tar of an OCI layout under a
// cap that the archive's files and the unpacked layers each fit but not
// together: unpacking the archive and its layers share one budget.
func TestImportLayoutArchiveOneBudget(t *testing.T) {
	dir := t.TempDir()
	lp := filepath.Join(dir, "layout")
	writeLayout(t, lp, testImage(t, testLayer(t, layerTar(t, file("noise", noise(256<<10))))))
	archive := treeBytes(lp)
	ociTar := filepath.Join(dir, "layout.tar")
	tarDir(t, lp, ociTar)
	info, err := openStore(t, Options{}).Import(context.Background(), ociTar, "fits")
	if err != nil {
		t.Fatalf("importing: %v", err)
	}
	limit := max(archive, info.Size) + 4<<10
	if limit >= archive+info.Size {
		t.Fatalf("archive %d and layers %d bytes: no cap fits each but not both", archive, info.Size)
	}
	_, err = openStore(t, Options{MaxBytes: limit}).Import(context.Background(), ociTar, "over")
	if err == nil || !strings.Contains(err.Error(), "per-pull cap") {
		t.Fatalf("cap %d, archive %d, layers %d bytes: got %v, want the per-pull cap error", limit, archive, info.Size, err)
	}
}

// noise is n bytes that do not compress, the same every run.
func noise(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return string(b)
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
