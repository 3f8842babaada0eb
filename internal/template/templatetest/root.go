package templatetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
)

// Root imports the test image imageName into a store of the test's own,
// leases it until the test ends, and returns it as the Manager resolves
// a template: the one way every backend's tests get a template root.
func Root(t testing.TB, imageName string) spec.Root {
	t.Helper()
	layout, _ := Image(t, imageName)
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := s.Import(ctx, layout, imageName); err != nil {
		t.Fatalf("importing test image %s: %v", imageName, err)
	}
	tpl, release, err := s.Lease(imageName)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return spec.Root{Template: tpl.Name, Dir: tpl.Root, Digest: tpl.Digest, Env: tpl.Config.Env}
}
