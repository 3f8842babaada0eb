//go:build !slim

package template

import (
	"archive/tar"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// PullOptions tunes one Pull.
type PullOptions struct {
	// Progress receives one line per layer (the CLI passes stderr).
	Progress io.Writer
	// Keychain finds credentials; default authn.DefaultKeychain, which
	// reads the Docker config file ($DOCKER_CONFIG/config.json or
	// ~/.docker/config.json) and its credential helpers.
	Keychain authn.Keychain
	// tls, lookup and dial are test hooks: a test registry's TLS
	// configuration, a resolver standing in for DNS, and a dialer
	// standing in for the network.
	tls    *tls.Config
	lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Pull fetches ref (any registry; the linux image for this machine's
// architecture from a multi-platform index) and stores it as name, or as
// DefaultName(ref) when name is "".
func (s *Store) Pull(ctx context.Context, ref, name string, o PullOptions) (Info, error) {
	r, err := parseRef(ref)
	if err != nil {
		return Info{}, err
	}
	if name == "" {
		name = DefaultName(r)
	}
	kc := o.Keychain
	if kc == nil {
		kc = authn.DefaultKeychain
	}
	tr := newNetGuard(ctx, r.Context().RegistryStr(), r.Context().Scheme(), o.lookup, o.dial).transport(o.tls)
	opts := []remote.Option{remote.WithContext(ctx), remote.WithAuthFromKeychain(kc),
		remote.WithPlatform(v1.Platform{OS: "linux", Architecture: runtime.GOARCH}),
		remote.WithTransport(tr)}
	info, err := s.install(ctx, name, r.String(), o.Progress, func(*installer) (v1.Image, func(), error) {
		img, err := remote.Image(r, opts...)
		return img, nil, err
	})
	if err != nil {
		return Info{}, pullError(ref, err)
	}
	return info, nil
}

func parseRef(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("image reference %q: %w (e.g. docker.io/library/python:3.12)", ref, err)
	}
	return r, nil
}

// pullError adds what to do to a registry's refusal.
func pullError(ref string, err error) error {
	var te *transport.Error
	if errors.As(err, &te) && (te.StatusCode == http.StatusUnauthorized || te.StatusCode == http.StatusForbidden) {
		return fmt.Errorf("pulling %q: the registry refused the credentials (log in with docker login, which writes the Docker config file): %w", ref, err)
	}
	return fmt.Errorf("pulling %q: %w", ref, err)
}

// DefaultName is a template name made from a reference: the repository's
// last path element, then "-" and the tag unless it is "latest".
func DefaultName(r name.Reference) string {
	n := path.Base(r.Context().RepositoryStr())
	if t, ok := r.(name.Tag); ok && t.TagStr() != "latest" {
		n += "-" + t.TagStr()
	}
	n = strings.ToLower(n)
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// Import stores, as name, the image in p: a docker save archive, an OCI
// image layout directory, or a tar of one. An archive or layout holding
// several images is refused.
func (s *Store) Import(ctx context.Context, p, name string) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, err
	}
	if err := ValidName(name); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(p)
	if err != nil {
		return Info{}, fmt.Errorf("importing: %w", err)
	}
	info, err := s.install(ctx, name, "", nil, func(in *installer) (v1.Image, func(), error) {
		if fi.IsDir() {
			img, err := layoutImage(p)
			return img, nil, err
		}
		return in.archiveImage(p)
	})
	if err != nil {
		return Info{}, fmt.Errorf("importing %q: %w", p, err)
	}
	return info, nil
}

// archiveImage reads a docker save archive (it has manifest.json)
// straight from the file once its metadata entries are checked, or
// unpacks a tar of an OCI layout into tmp/ (as hostile as a layer, under
// the same lock and budget) and reads that; cleanup removes what it
// unpacked.
func (in *installer) archiveImage(p string) (v1.Image, func(), error) {
	has, err := tarHas(p, "manifest.json", "index.json")
	if err != nil {
		return nil, nil, err
	}
	switch {
	case has["manifest.json"]:
		if err := checkDockerArchive(p, in.s.o.MaxEntries); err != nil {
			return nil, nil, err
		}
		img, err := tarball.ImageFromPath(p, nil)
		return img, nil, err
	case !has["index.json"]:
		return nil, nil, errors.New("neither a docker save archive (manifest.json) nor an OCI layout (index.json)")
	}
	dir, err := os.MkdirTemp(filepath.Join(in.s.dir, "tmp"), "layout-")
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {
		if err := removeTree(dir); err != nil {
			in.s.o.Log.Warn("removing an unpacked OCI layout", "dir", dir, "err", err)
		}
	}
	f, err := os.Open(p)
	if err != nil {
		return nil, cleanup, err
	}
	defer f.Close()
	if err := unpackLayer(f, dir, "(OCI layout archive)", &in.budget, in.s.o.Log.Warn); err != nil {
		return nil, cleanup, err
	}
	img, err := layoutImage(dir)
	return img, cleanup, err
}

// tarHas reports which of names are entries of the tar at p.
func tarHas(p string, names ...string) (map[string]bool, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]bool{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("not a tar archive: %w", err)
		}
		for _, n := range names {
			if path.Clean(h.Name) == n {
				out[n] = true
			}
		}
	}
}
