// Package templatetest makes the OCI images the template tests use, offline:
// each is a Debian root built from packages with mmdebstrap from the Debian
// mirror apt already uses, turned into layers with go-containerregistry, and
// written both as an OCI image layout and as a docker-save tarball. Every
// image shares one base layer (a small Debian with python3 and bash), so a
// test can check that a store unpacks a shared layer once.
//
// Building takes minutes, so the images are cached (CacheDir) under a key
// made of the package lists, the build recipe and the Debian release apt
// last saw; `make test-images` builds them once per machine and `make test`
// depends on it. A test that cannot get an image (not root, no mmdebstrap)
// skips with the reason, or fails under WARDEN_CI=1.
package templatetest

import (
	"fmt"
	"slices"
	"time"
)

// sourceDateEpoch is the time the build and the layers are dated, so that
// rebuilds from the same packages give the same files.
const sourceDateEpoch = 1700000000

// epoch is the modification time every entry is clamped to, so that two
// builds from the same packages give layers that differ only where the
// packages' own files do.
var epoch = time.Unix(sourceDateEpoch, 0)

// recipeVersion changes whenever the way images are built changes, so the
// cache key then changes too.
const recipeVersion = "2"

// suite and mirror are the Debian release and mirror the images come from
// (the main suite only: its packages change at point releases, not daily).
const (
	suite  = "bookworm"
	mirror = "http://deb.debian.org/debian"
)

// basePackages make the base layer every image shares: the Python driver
// needs python3, and bash is the shell tests run.
var basePackages = []string{"python3", "bash"}

// recipe is one image: the base layer plus, when extra is not empty, a
// second layer holding those packages (and what they depend on).
type recipe struct {
	name  string
	extra []string
}

// recipes is the one list of the test images.
var recipes = []recipe{
	{name: "minimal"},
	{name: "datasci", extra: []string{"python3-numpy", "python3-pandas", "python3-matplotlib"}},
}

// Names lists the images Image and Registry offer.
func Names() []string {
	n := make([]string, len(recipes))
	for i, r := range recipes {
		n[i] = r.name
	}
	return n
}

// find returns the recipe called name.
func find(name string) (recipe, error) {
	i := slices.IndexFunc(recipes, func(r recipe) bool { return r.name == name })
	if i < 0 {
		return recipe{}, fmt.Errorf("no test image %q (have %v)", name, Names())
	}
	return recipes[i], nil
}

// extraPackages lists the packages of every non-base layer, in recipe order.
func extraPackages() []string {
	var p []string
	for _, r := range recipes {
		p = append(p, r.extra...)
	}
	return p
}
