package templatetest

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// CacheDir is where the images are kept: $WARDEN_TEST_IMAGES when set, else
// /var/cache/warden-test-images for root, else the user's cache directory.
func CacheDir() (string, error) {
	if d := os.Getenv("WARDEN_TEST_IMAGES"); d != "" {
		return d, nil
	}
	if os.Geteuid() == 0 {
		return "/var/cache/warden-test-images", nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("finding a cache directory (set WARDEN_TEST_IMAGES): %w", err)
	}
	return filepath.Join(d, "warden-test-images"), nil
}

// key names one build: a hash of the recipe, the package lists and the
// Debian release (its InRelease date as apt last fetched it), so the
// images are rebuilt when any of them changes and never otherwise.
func key() string {
	h := sha256.New()
	fmt.Fprintf(h, "recipe %s\nsuite %s %s\nrelease %s\nbase %s\n", recipeVersion, suite, mirror, releaseDate(), strings.Join(basePackages, ","))
	for _, r := range recipes {
		fmt.Fprintf(h, "image %s %s\n", r.name, strings.Join(r.extra, ","))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// releaseDate returns the Date field of the suite's InRelease file in apt's
// lists, or "unknown" when apt has none.
func releaseDate() string {
	m, _ := filepath.Glob("/var/lib/apt/lists/*_dists_" + suite + "_InRelease")
	if len(m) == 0 {
		return "unknown"
	}
	f, err := os.Open(m[0])
	if err != nil {
		return "unknown"
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if d, ok := strings.CutPrefix(s.Text(), "Date: "); ok {
			return d
		}
	}
	return "unknown"
}

// Paths are where one image lives in the cache.
type Paths struct {
	// Layout is the OCI image layout directory (index.json, blobs/).
	Layout string
	// Tar is the docker-save tarball, tagged warden-test/NAME:latest.
	Tar string
}

// pathsIn returns the paths of image name in build directory dir.
func pathsIn(dir, name string) Paths {
	return Paths{Layout: filepath.Join(dir, name, "layout"), Tar: filepath.Join(dir, name, "image.tar")}
}

// Tag is the tag an image carries in its docker-save tarball and in the
// registry Registry starts.
func Tag(name string) string { return "warden-test/" + name + ":latest" }
