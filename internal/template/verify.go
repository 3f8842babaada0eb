//go:build !slim

package template

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
)

// A template's Digest (the manifest's) names its tree only if every
// blob is the one the manifest names: the manifest fixes the config's
// digest, the config the layers' diffIDs, and each layer's content is
// hashed against its diffID as it is unpacked (unpackVerified). The
// digest itself is go-containerregistry's hash of the manifest's bytes
// (manifestOf), a registry's blobs are checked by go-containerregistry
// and a docker save archive's manifest is computed from its blobs, but
// an OCI layout's blobs are files read by name and never hashed there:
// so the config is hashed here for every source (checkBlob), and a
// layout's compressed layers as they are read (verifiedLayout). Shared
// roots keyed by the digest (rootfs.SharedImageTemplate) are then one
// tree's.

// checkBlob refuses b, the blob what, unless it has the digest and size
// of d.
func checkBlob(b []byte, d v1.Descriptor, what string) error {
	got := "sha256:" + hexSum(b)
	if d.Digest.Algorithm != "sha256" || got != d.Digest.String() || int64(len(b)) != d.Size {
		return fmt.Errorf("the %s (%d bytes, %s) is not the %d-byte %s the manifest names: the image is corrupt or forged, refused", what, len(b), got, d.Size, d.Digest)
	}
	return nil
}

func hexSum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// verifiedLayout is an OCI layout's image whose layers check their
// compressed blob against the manifest's digest and size as they are
// read.
type verifiedLayout struct{ v1.Image }

// Layers wraps each layer of the image (in manifest order).
func (v verifiedLayout) Layers() ([]v1.Layer, error) {
	ls, err := v.Image.Layers()
	if err != nil {
		return nil, err
	}
	out := make([]v1.Layer, len(ls))
	for i, l := range ls {
		out[i] = verifiedLayer{l}
	}
	return out, nil
}

// verifiedLayer is a layer whose streams are hashed against its digest.
type verifiedLayer struct{ v1.Layer }

// Compressed is the blob, failing at its end (or past its declared size)
// unless it has the layer's digest.
func (l verifiedLayer) Compressed() (io.ReadCloser, error) { return l.blob() }

func (l verifiedLayer) blob() (*digestReader, error) {
	d, err := l.Digest()
	if err != nil {
		return nil, err
	}
	size, err := l.Size()
	if err != nil {
		return nil, err
	}
	if d.Algorithm != "sha256" {
		return nil, fmt.Errorf("layer %s: only sha256 digests are accepted", d)
	}
	rc, err := l.Layer.Compressed()
	if err != nil {
		return nil, err
	}
	return &digestReader{rc: rc, want: d, size: size, h: sha256.New()}, nil
}

// Uncompressed decompresses the checked blob; at the end of the
// uncompressed stream it reads the blob to its end, so the check runs
// even if the decompressor stopped short of it.
func (l verifiedLayer) Uncompressed() (io.ReadCloser, error) {
	b, err := l.blob()
	if err != nil {
		return nil, err
	}
	u, err := partial.CompressedToLayer(fixedBlob{l.Layer, b})
	if err == nil {
		var rc io.ReadCloser
		if rc, err = u.Uncompressed(); err == nil {
			return &checkAtEnd{ReadCloser: rc, blob: b}, nil
		}
	}
	_ = b.Close() // read-only; the decompressor's error is the one to report
	return nil, err
}

// fixedBlob is a layer whose Compressed returns one given stream.
type fixedBlob struct {
	v1.Layer
	rc io.ReadCloser
}

func (b fixedBlob) Compressed() (io.ReadCloser, error) { return b.rc, nil }

// checkAtEnd is an uncompressed stream that ends only once its blob has
// been read whole and matched its digest.
type checkAtEnd struct {
	io.ReadCloser
	blob *digestReader
}

func (c *checkAtEnd) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		if _, derr := io.Copy(io.Discard, c.blob); derr != nil {
			return n, derr
		}
	}
	return n, err
}

// digestReader reads at most size bytes of rc and, at its end, fails
// unless they were exactly size bytes hashing to want.
type digestReader struct {
	rc   io.ReadCloser
	want v1.Hash
	size int64
	n    int64
	h    hash.Hash
	err  error // the check's result, once made
}

func (r *digestReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	if rest := r.size + 1 - r.n; int64(len(p)) > rest {
		p = p[:rest]
	}
	n, err := r.rc.Read(p)
	r.n += int64(n)
	r.h.Write(p[:n])
	switch {
	case r.n > r.size:
		r.err = fmt.Errorf("layer %s: the blob is longer than the %d bytes the manifest declares: refused", r.want, r.size)
		return n, r.err
	case errors.Is(err, io.EOF):
		r.err = r.check()
		return n, r.err
	}
	return n, err
}

// check is the result at the blob's end: io.EOF if it matched.
func (r *digestReader) check() error {
	if got := "sha256:" + hex.EncodeToString(r.h.Sum(nil)); got != r.want.String() || r.n != r.size {
		return fmt.Errorf("layer %s: the blob does not match its digest (%d bytes hashing to %s): refused", r.want, r.n, got)
	}
	return io.EOF
}

func (r *digestReader) Close() error { return r.rc.Close() }
