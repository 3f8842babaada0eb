package template

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"sync"
	"time"
)

// Host is the reserved name of today's root (the host's /usr and so on):
// the zero-configuration default, never stored.
const Host = "host"

// Default per-pull caps: generous for real images, small enough that a
// bomb cannot fill the disk.
const (
	DefaultMaxBytes   int64 = 4 << 30
	DefaultMaxEntries int64 = 1 << 20
)

// Options configures a Store. Zero values take the defaults.
type Options struct {
	// MaxBytes caps what one pull, import or commit may download and
	// unpack (declared compressed sizes, and unpacked file bytes).
	MaxBytes int64
	// MaxEntries caps the tar entries one pull may unpack.
	MaxEntries int64
	// Log receives warnings (device nodes dropped). Default: discard.
	Log *slog.Logger
}

// Config is what the image's config says about running it.
type Config struct {
	Env        []string `json:"env,omitempty"`
	User       string   `json:"user,omitempty"`
	WorkingDir string   `json:"workingDir,omitempty"`
	Entrypoint []string `json:"entrypoint,omitempty"`
	Cmd        []string `json:"cmd,omitempty"`
}

// Template is a stored template, ready to run: Root is an absolute
// directory holding its whole read-only root tree (owned by root, no
// set-id bits, no group/world write), usable as a bind source (native),
// a bundle root (gVisor) or a docker image's source.
//
// Root's files are hard links to the store's layers, shared by every
// template made from those layers: a write through one would change
// them all, and the stored layers. Every backend MUST therefore mount
// Root read-only and never write into it; a sandbox's writes go to its
// own scratch mounts or an overlay above Root.
type Template struct {
	Name    string    `json:"name"`
	Digest  string    `json:"digest"` // the image manifest's digest
	Ref     string    `json:"ref,omitempty"`
	Created time.Time `json:"created"`
	Size    int64     `json:"size"`   // bytes of file data across its layers
	Layers  []string  `json:"layers"` // diff ids, lowest first
	Config  Config    `json:"config"`
	// SharedWith names the tenants that may use it (UsableBy): Everyone
	// for a pulled or imported one, the committed session's tenant or
	// whom the operator chose for a commit.
	SharedWith []string `json:"shared_with,omitempty"`
	Root       string   `json:"-"`
}

// Info describes a template and, after Pull, Import or Commit, how many
// of its layers that call unpacked and how many it found already stored.
type Info struct {
	Template
	Unpacked int `json:"unpacked,omitempty"`
	Reused   int `json:"reused,omitempty"`
}

// Store is the template store at one directory: layers/<hex>/root holds
// each layer's tree (whiteouts kept as markers), layers/<hex>/layer.json
// its size; templates/<name>/ holds template.json, the image's
// manifest.json and config.json, and rootfs (Template.Root); tmp/ holds
// work in progress, renamed into place when complete. Mutations hold an
// exclusive lock on the store's lock file, so several processes may
// share it.
type Store struct {
	dir string
	o   Options
}

// NamePattern is what a template name may be: the one source of the rule
// ValidName checks, which the OpenAPI schema and MCP's tool schema state
// too (TestNamePatternEverywhere keeps them equal).
const NamePattern = `^[a-z0-9][a-z0-9._-]{0,62}$`

var nameRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(NamePattern) })

// ErrNotFound says the store holds no template of that name (or it is
// being removed): a client's mistake, unlike the store's own failures.
var ErrNotFound = errors.New("no template")

// notFound is ErrNotFound for name, saying where to look.
func notFound(name string) error {
	return fmt.Errorf("%w %q: see warden template ls", ErrNotFound, name)
}

// ValidName refuses a template name that is not lower-case letters,
// digits, '.', '_' and '-' (at most 63, first a letter or digit), or that
// is the reserved "host".
func ValidName(name string) error {
	if name == Host {
		return errors.New(`template name "host" is reserved for the host's own root: choose another`)
	}
	if !nameRE().MatchString(name) {
		return fmt.Errorf("template name %q: use 1-63 of a-z, 0-9, '.', '_', '-', starting with a letter or digit", name)
	}
	return nil
}

// Open opens (creating it, 0700) the store at dir.
func Open(dir string, o Options) (*Store, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("template store %q: must be an absolute path", dir)
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.MaxEntries <= 0 {
		o.MaxEntries = DefaultMaxEntries
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{dir, filepath.Join(dir, "layers"), filepath.Join(dir, "templates"), filepath.Join(dir, "tmp")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("making the template store: %w", err)
		}
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the template store private: %w", err)
	}
	return &Store{dir: dir, o: o}, nil
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

func (s *Store) layerDir(diffID string) string {
	return filepath.Join(s.dir, "layers", hexOf(diffID))
}

func (s *Store) templateDir(name string) string {
	return filepath.Join(s.dir, "templates", name)
}

// Get returns the template called name.
func (s *Store) Get(name string) (Template, error) {
	if err := ValidName(name); err != nil {
		return Template{}, fmt.Errorf("%w: %w", ErrNotFound, err)
	}
	b, err := os.ReadFile(filepath.Join(s.templateDir(name), "template.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Template{}, notFound(name)
	}
	if err != nil {
		return Template{}, fmt.Errorf("reading template %q: %w", name, err)
	}
	var t Template
	if err := json.Unmarshal(b, &t); err != nil {
		return Template{}, fmt.Errorf("reading template %q: %w", name, err)
	}
	t.Root = filepath.Join(s.templateDir(name), "rootfs")
	return t, nil
}

// List returns every stored template, by name: the operator's view, so
// a template whose metadata cannot be read fails it, naming that one.
func (s *Store) List() ([]Info, error) {
	return s.list(func(_ string, err error) error { return err })
}

// list returns every stored template, by name; unreadable says what a
// template Get fails on does to the listing: its error, or nil to leave
// that template out.
func (s *Store) list(unreadable func(name string, err error) error) ([]Info, error) {
	ents, err := os.ReadDir(filepath.Join(s.dir, "templates"))
	if err != nil {
		return nil, fmt.Errorf("listing templates: %w", err)
	}
	var out []Info
	for _, e := range ents {
		t, err := s.Get(e.Name())
		if err != nil {
			if err := unreadable(e.Name(), err); err != nil {
				return nil, err
			}
			continue
		}
		out = append(out, Info{Template: t})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes the template called name; its layers stay until GC.
// It refuses a template a sandbox holds a Lease on.
func (s *Store) Remove(name string) error {
	if err := ValidName(name); err != nil {
		return err
	}
	unlock, err := s.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := s.Get(name); err != nil {
		return err
	}
	held, err := s.holdForRemoval(name)
	if err != nil {
		return err
	}
	defer held()
	tmp, err := os.MkdirTemp(filepath.Join(s.dir, "tmp"), "rm-")
	if err != nil {
		return fmt.Errorf("removing template %q: %w", name, err)
	}
	gone := filepath.Join(tmp, name)
	if err := os.Rename(s.templateDir(name), gone); err != nil {
		return fmt.Errorf("removing template %q: %w", name, err)
	}
	if err := removeTree(tmp); err != nil {
		return fmt.Errorf("removing template %q: %w", name, err)
	}
	return nil
}

func hexOf(digest string) string {
	if len(digest) > 7 && digest[:7] == "sha256:" {
		return digest[7:]
	}
	return digest
}

// LayerRoots are the trees of t's layers in the store, lowest first
// (whiteouts and opaque markers kept as the empty files an OCI layer
// has): the Docker backend packs each as a layer of its own, so images
// of templates sharing a layer share it in Docker's storage too.
func (s *Store) LayerRoots(t Template) []string {
	roots := make([]string, len(t.Layers))
	for i, l := range t.Layers {
		roots[i] = filepath.Join(s.layerDir(l), "root")
	}
	return roots
}
