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
	return Roots(t, imageName)[0]
}

// Roots is Root for several images in one store, so they share the
// layers they have in common (every test image shares the base layer).
func Roots(t testing.TB, imageNames ...string) []spec.Root {
	t.Helper()
	s, err := template.Open(filepath.Join(t.TempDir(), "templates"), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var roots []spec.Root
	for _, name := range imageNames {
		layout, _ := Image(t, name)
		roots = append(roots, Import(t, s, name, layout))
	}
	return roots
}

// Import imports the image at layout (an OCI layout directory) into s as
// name, leases it until the test ends, and returns its root.
func Import(t testing.TB, s *template.Store, name, layout string) spec.Root {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := s.Import(ctx, layout, name); err != nil {
		t.Fatalf("importing test image %s: %v", name, err)
	}
	tpl, release, err := s.Lease(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return spec.Root{Template: tpl.Name, Dir: tpl.Root, Digest: tpl.Digest, Env: tpl.Config.Env}
}
