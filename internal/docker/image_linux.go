package docker

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/warden-sandbox/warden/internal/rootfs"
)

// rootRepo names the image Warden builds from the root template.
const rootRepo = "warden-root"

// rootImage makes sure the engine has the image of the template t, and
// names it: repo:tag, the tag a hash of its content, so a host whose
// /etc changed gets a new image and an unchanged one builds it once.
// The image holds only the template's small files and mount points; the
// host's /usr and the bound /etc directories are mounted at run time, as
// in the native root, so no registry and no copy of /usr are needed.
func rootImage(ctx context.Context, e engineAPI, t rootfs.Template) (string, error) {
	var buf bytes.Buffer
	if err := packTree(&buf, t.Dir, false); err != nil {
		return "", fmt.Errorf("packing the root template: %w", err)
	}
	tarball := buf.Bytes()
	sum := sha256.Sum256(tarball)
	tag := hex.EncodeToString(sum[:6])
	ref := rootRepo + ":" + tag
	if ok, err := e.HasImage(ctx, ref); err != nil || ok {
		return ref, err
	}
	if err := e.Import(ctx, rootRepo, tag, bytes.NewReader(tarball)); err != nil {
		return "", fmt.Errorf("importing %s: %w", ref, err)
	}
	return ref, nil
}
