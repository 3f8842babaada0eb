package docker

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TemplateRepo names the images Warden makes from templates. Each is
// tagged by the hex of the template's image digest and a short hash of
// its store (templateTag), so a template pulled again under the same name
// with other content gets another image, one content is imported once per
// store whatever it is called, and each store's gc removes only images
// that no other store's templates use.
const TemplateRepo = "warden-template"

// TemplateLabel marks every template image; its value is the template's
// digest, by which `warden template gc` finds the images of templates
// the store no longer has (RemoveTemplateImages).
const TemplateLabel = "warden.template"

// StoreLabel names the template store a template image was made from, so
// that `warden template gc` of one store never removes the images of
// another's templates (a test's, or a second --state-dir's).
const StoreLabel = "warden.template.store"

// storeOf is the store holding the template tree root: the store keeps
// each tree at <store>/templates/<name>/rootfs (template.Store.Get).
func storeOf(root string) string {
	return filepath.Dir(filepath.Dir(filepath.Dir(root)))
}

// templateTag is the tag of the image of template content digestHex
// (the digest's hex) from the store at store: that hex, then the first 12 hex
// digits of the store path's sha256. Two stores holding one digest get an
// image each, which each store's gc (RemoveTemplateImages, by
// StoreLabel) may remove without taking the other's.
func templateTag(digestHex, store string) string {
	sum := sha256.Sum256([]byte(store))
	return digestHex + "-" + fmt.Sprintf("%x", sum[:6])
}

// digestRE is the only digest a template image is made for: sha256 in
// lower-case hex, as the store writes it, so the tag and the lock file's
// name hold nothing but hex and templateTag's dash.
var digestRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:([0-9a-f]{64})$`) })

// templateImages serialises the making of each template's image in this
// process, by tag; imageLockDir's lock files do it across processes.
type templateImages struct {
	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

func (t *templateImages) lock(tag string) func() {
	t.mu.Lock()
	if t.locks == nil {
		t.locks = map[string]*sync.Mutex{}
	}
	m := t.locks[tag]
	if m == nil {
		m = &sync.Mutex{}
		t.locks[tag] = m
	}
	t.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// imageLockDir holds one lock file per template image tag, taken while its
// image is looked for and made, so that Wardens starting a box on the
// same new template at once import it once.
var imageLockDir = filepath.Join(StateDir, "images")

// templateImage makes sure the engine has the image of the template
// root, and names it: the template's store layers, one Docker layer each
// (loadTemplate), loaded the first time a box runs on that content. Concurrent
// first uses, in this process or others, import it once; later ones only
// look it up. The image is what Warden's own root image is to the host's
// root: the box's files, read-only, with Warden's mounts over them.
func (r *Runtime) templateImage(ctx context.Context, root spec.Root) (_ string, err error) {
	m := digestRE().FindStringSubmatch(root.Digest)
	if m == nil {
		return "", fmt.Errorf("template %q has digest %q, not sha256 and 64 hex digits: import or pull it again", root.Template, root.Digest)
	}
	tag := templateTag(m[1], storeOf(root.Dir))
	ref := TemplateRepo + ":" + tag
	if ok, err := r.engine.HasImage(ctx, ref); err != nil || ok {
		return ref, err
	}
	defer r.templates.lock(tag)()
	unlock, err := lockFile(ctx, filepath.Join(imageLockDir, tag+".lock"))
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	if ok, err := r.engine.HasImage(ctx, ref); err != nil || ok {
		return ref, err
	}
	if err := r.loadTemplate(ctx, root, tag); err != nil {
		return "", fmt.Errorf("making the docker image of template %q: %w", root.Template, err)
	}
	return ref, nil
}

// lockFile takes an exclusive flock on p (made if missing, with its
// directory) and returns its release. It waits while another process
// holds it (making the same image), until ctx ends.
func lockFile(ctx context.Context, p string) (func() error, error) {
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening %q: %w", p, err)
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() error { return closeLock(f) }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, errors.Join(fmt.Errorf("locking %q: %w", p, err), closeLock(f))
		}
		select {
		case <-ctx.Done():
			return nil, errors.Join(fmt.Errorf("waiting for another Warden making the same template image (%q): %w", p, ctx.Err()), closeLock(f))
		case <-time.After(lockPoll):
		}
	}
}

// lockPoll is how often lockFile tries a held lock again.
const lockPoll = 50 * time.Millisecond

// templateRootError refuses a box given both a raw Docker image and a
// template: each names the box's whole root.
func (r *Runtime) templateRootError(s spec.Spec) error {
	if r.Image == "" || s.Root.IsHost() {
		return nil
	}
	return fmt.Errorf("%w: --image %s and template %q both name the box's root: give one (warden template import makes a template of a docker save archive)", spec.ErrInvalid, r.Image, s.Root.Template)
}

// closeLock closes lock file f (which releases its flock), saying which
// file failed to close.
func closeLock(f *os.File) error {
	if err := f.Close(); err != nil {
		return fmt.Errorf("closing the lock %q: %w", f.Name(), err)
	}
	return nil
}
