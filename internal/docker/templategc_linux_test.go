package docker

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"testing"
)

// TestRemoveTemplateImagesNoEngine: a missing socket and a stale one (a
// file no engine listens on) both say ErrNoEngine, whatever the host's
// engine does.
func TestRemoveTemplateImagesNoEngine(t *testing.T) {
	dir := t.TempDir()
	stale := filepath.Join(dir, "stale.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, sock := range []string{filepath.Join(dir, "missing.sock"), stale} {
		t.Setenv("DOCKER_HOST", "unix://"+sock)
		removed, err := RemoveTemplateImages(context.Background(), dir, func(string) bool { return false })
		if !errors.Is(err, ErrNoEngine) || len(removed) != 0 {
			t.Errorf("%s: got %v, %v; want no images and ErrNoEngine", sock, removed, err)
		}
	}
}
