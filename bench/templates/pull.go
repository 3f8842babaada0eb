package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/internal/template"
)

// pulls are the pull part's steps in order: the datasci image first, then
// the minimal one (its base layer is datasci's) and datasci again under
// another repository (every layer shared).
var pulls = []struct{ image, repo string }{
	{"datasci", "bench/datasci"},
	{"minimal", "bench/minimal"},
	{"datasci", "bench/datasci-copy"},
}

// pullPart pushes the test images to an in-process registry on loopback
// and pulls them, in the order of pulls, into an empty store.
func pullPart(ctx context.Context, b *strings.Builder, images string) error {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir, err := os.MkdirTemp("", "bench-pull-")
	if err != nil {
		return fmt.Errorf("making a store directory: %w", err)
	}
	defer removeAll(dir)
	s, err := template.Open(filepath.Join(dir, "templates"), template.Options{})
	if err != nil {
		return fmt.Errorf("opening a store: %w", err)
	}
	fmt.Fprintln(b, "## Pull: from an in-process registry on loopback into an empty store\n\n| template | compressed MB | unpacked MB (files) | layers unpacked | layers reused | seconds | store MB after |\n|---|---|---|---|---|---|---|")
	for _, p := range pulls {
		img, err := layoutImage(filepath.Join(images, p.image, "layout"))
		if err != nil {
			return err
		}
		ref := host + "/" + p.repo + ":latest"
		tag, err := name.NewTag(ref, name.Insecure)
		if err != nil {
			return fmt.Errorf("naming %s: %w", ref, err)
		}
		if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		start := time.Now()
		info, err := s.Pull(ctx, ref, strings.TrimPrefix(p.repo, "bench/"), template.PullOptions{})
		if err != nil {
			return fmt.Errorf("pulling %s: %w", ref, err)
		}
		d := time.Since(start)
		fmt.Fprintf(b, "| %s (%s) | %.1f | %.1f | %d | %d | %.2f | %.1f |\n", info.Name, p.image, mb(compressed(img)),
			mb(info.Size), info.Unpacked, info.Reused, d.Seconds(), mb(diskUse(dir)))
	}
	fmt.Fprintln(b)
	return nil
}

// layoutImage is the one image of the OCI layout at dir.
func layoutImage(dir string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, fmt.Errorf("reading the layout %s: %w", dir, err)
	}
	m, err := idx.IndexManifest()
	if err != nil || len(m.Manifests) == 0 {
		return nil, fmt.Errorf("reading the layout %s's index (%d images): %w", dir, lenManifests(m), err)
	}
	img, err := idx.Image(m.Manifests[0].Digest)
	if err != nil {
		return nil, fmt.Errorf("reading the image in %s: %w", dir, err)
	}
	return img, nil
}

func lenManifests(m *v1.IndexManifest) int {
	if m == nil {
		return 0
	}
	return len(m.Manifests)
}

// compressed is the sum of img's layers' compressed sizes, as the
// manifest states them.
func compressed(img v1.Image) int64 {
	m, err := img.Manifest()
	if err != nil {
		log.Printf("reading a manifest: %v", err)
		return 0
	}
	var n int64
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

// diskUse is the bytes of disk the tree at dir takes, each inode counted
// once (hard links share theirs).
func diskUse(dir string) int64 {
	out, err := output("du", "-sB1", dir)
	if err != nil {
		log.Printf("du %s: %v: %s", dir, err, measure.Tail(out))
		return 0
	}
	var n int64
	if _, err := fmt.Sscan(string(out), &n); err != nil {
		log.Printf("reading du's answer %q: %v", out, err)
	}
	return n
}

func mb(n int64) float64 { return float64(n) / 1e6 }
