//go:build !slim

package template

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// writeLayout writes img as an OCI layout at dir.
func writeLayout(t *testing.T, dir string, img v1.Image) {
	t.Helper()
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
}

// tarEntries writes the entries as the tar file out; an entry with link
// set is a symlink.
func tarEntries(t *testing.T, out string, es ...entry) {
	t.Helper()
	if err := os.WriteFile(out, layerTar(t, es...), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestImportRefusesHostileLayouts imports OCI layouts (tars of them and
// directories) that point outside themselves or declare huge metadata:
// each is refused before its content is read, and nothing is installed.
func TestImportRefusesHostileLayouts(t *testing.T) {
	host := filepath.Join(t.TempDir(), "host-layout") // an image the operator has, not the archive's
	writeLayout(t, host, testImage(t, baseLayer(t)))
	index, err := os.ReadFile(filepath.Join(host, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(index, &idx); err != nil {
		t.Fatal(err)
	}
	manifest := "blobs/sha256/" + idx.Manifests[0].Digest.Hex
	padded := string(index) + strings.Repeat(" ", maxIndex) // valid JSON, over the cap
	hostBlobs := filepath.Join(host, "blobs")
	work := t.TempDir()
	tests := []struct {
		name    string
		entries []entry
		want    string
	}{
		{"symlinked blobs", []entry{file("oci-layout", `{"imageLayoutVersion":"1.0.0"}`), file("index.json", string(index)), symlink("blobs", hostBlobs)},
			`"blobs" is a symlink`},
		{"symlinked index.json", []entry{file("oci-layout", `{"imageLayoutVersion":"1.0.0"}`), symlink("index.json", filepath.Join(host, "index.json")), symlink("blobs", hostBlobs)},
			"is a symlink"},
		{"index.json to dev-zero", []entry{file("oci-layout", `{"imageLayoutVersion":"1.0.0"}`), symlink("index.json", "/dev/zero")},
			`"index.json" is a symlink`},
		{"symlinked manifest", []entry{file("oci-layout", `{"imageLayoutVersion":"1.0.0"}`), file("index.json", string(index)), dir("blobs"), dir("blobs/sha256"), symlink(manifest, filepath.Join(host, manifest))},
			"is a symlink"},
		{"huge index.json", []entry{file("oci-layout", `{"imageLayoutVersion":"1.0.0"}`), file("index.json", padded)},
			"index.json is 4194"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, Options{})
			p := filepath.Join(work, strings.ReplaceAll(tc.name, " ", "-")+".tar")
			tarEntries(t, p, tc.entries...)
			_, err := s.Import(context.Background(), p, "evil")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if _, err := s.Get("evil"); err == nil {
				t.Errorf("the hostile layout was installed")
			}
		})
	}
	t.Run("symlink in a layout directory", func(t *testing.T) {
		d := filepath.Join(work, "layout-dir")
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "index.json"), index, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(hostBlobs, filepath.Join(d, "blobs")); err != nil {
			t.Fatal(err)
		}
		_, err := openStore(t, Options{}).Import(context.Background(), d, "evil")
		if err == nil || !strings.Contains(err.Error(), "is a symlink") {
			t.Fatalf("got %v, want the symlink refused", err)
		}
	})
}

// rewriteTar copies the tar src to dst through edit, which may change an
// entry's header and body.
func rewriteTar(t *testing.T, src, dst string, edit func(h *tar.Header, body []byte) []byte) {
	t.Helper()
	in, err := os.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var buf bytes.Buffer
	tr, tw := tar.NewReader(in), tar.NewWriter(&buf)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		body = edit(h, body)
		h.Size = int64(len(body))
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	// tar.Writer drops GNU.sparse records, so they go in under a
	// placeholder of the same length, swapped afterwards.
	out := bytes.ReplaceAll(buf.Bytes(), []byte("XXX.xxxxxx."), []byte("GNU.sparse."))
	if err := os.WriteFile(dst, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestImportRefusesHostileDockerArchives checks a docker save archive's
// metadata is refused from its headers before go-containerregistry reads
// it whole: a sparse config (a few bytes declaring any size: here only
// 100, to stay harmless if the check is broken) and a config over the cap.
func TestImportRefusesHostileDockerArchives(t *testing.T) {
	dir := t.TempDir()
	save := filepath.Join(dir, "save.tar")
	tag, err := name.NewTag("test/img:1")
	if err != nil {
		t.Fatal(err)
	}
	img := testImage(t, baseLayer(t))
	if err := tarball.WriteToFile(save, tag, img); err != nil {
		t.Fatal(err)
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	isConfig := func(h *tar.Header) bool { return h.Name == cfgName.String() }
	tests := []struct {
		name string
		edit func(h *tar.Header, body []byte) []byte
		want string
	}{
		{"sparse config", func(h *tar.Header, body []byte) []byte {
			if !isConfig(h) {
				return body
			}
			h.Format = tar.FormatPAX
			h.PAXRecords = map[string]string{"XXX.xxxxxx.numblocks": "1", "XXX.xxxxxx.map": "100,0", "XXX.xxxxxx.size": "100"}
			return nil
		}, "is a sparse file"},
		{"config over the cap", func(h *tar.Header, body []byte) []byte {
			if !isConfig(h) {
				return body
			}
			return append(body, bytes.Repeat([]byte(" "), maxConfig)...) // still valid JSON
		}, "over the cap of 8388608"},
		{"config a link", func(h *tar.Header, body []byte) []byte {
			if !isConfig(h) {
				return body
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, "manifest.json"
			return nil
		}, "is a link"},
		{"manifest.json over the cap", func(h *tar.Header, body []byte) []byte {
			if h.Name != "manifest.json" {
				return body
			}
			return append(body, bytes.Repeat([]byte(" "), maxIndex)...)
		}, "manifest.json is 4194"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".tar")
			rewriteTar(t, save, p, tc.edit)
			_, err := openStore(t, Options{}).Import(context.Background(), p, "evil")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestPullRefusesHugeConfig serves a manifest declaring a config larger
// than the cap: the pull is refused before the config blob is requested.
func TestPullRefusesHugeConfig(t *testing.T) {
	tests := []struct {
		name     string
		maxBytes int64
		config   int64
		want     string
	}{
		{"over the config cap", 0, 300 << 20, "image config declares 314572800 bytes"},
		{"over the pull cap", 1 << 20, 2 << 20, "image config declares 2097152 bytes"},
		{"negative", 0, -1, "image config declares -1 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var blobs atomic.Int64
			host := serveRegistry(t, func(next http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					if strings.Contains(r.URL.Path, "/blobs/") {
						blobs.Add(1)
					}
					if !strings.Contains(r.URL.Path, "/manifests/") {
						next.ServeHTTP(w, r)
						return
					}
					m := fmt.Sprintf(`{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","config":{"mediaType":"application/vnd.oci.image.config.v1+json","size":%d,"digest":"sha256:%064x"},"layers":[]}`, tc.config, 1)
					w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
					w.Header().Set("Docker-Content-Digest", fmt.Sprintf("sha256:%x", sha(m)))
					_, _ = io.WriteString(w, m)
				})
			})
			s := openStore(t, Options{MaxBytes: tc.maxBytes})
			_, err := s.Pull(context.Background(), host+"/huge:1", "", PullOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if n := blobs.Load(); n != 0 {
				t.Errorf("the config blob was requested %d times, want the manifest refused first", n)
			}
		})
	}
}

func sha(s string) [32]byte { return sha256.Sum256([]byte(s)) }
