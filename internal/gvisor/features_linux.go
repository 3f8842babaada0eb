package gvisor

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
)

// features are what a runsc binary's checkpoint and restore can do beyond
// runsc 2022-12-19's (Debian's), which has none of them: both runscs must
// work, so Warden asks each binary rather than assume its release.
type features struct {
	// uncompressed: `runsc checkpoint --compression none` writes the
	// memory as page-aligned pages.img (with pages_meta.img) beside
	// checkpoint.img, instead of flate-compressing one image.
	uncompressed bool
	// flate: `runsc checkpoint --compression flate-best-speed` writes
	// the memory flate-compressed into checkpoint.img, as runsc
	// 2022-12-19 always does without the flag (CompressionFast).
	flate bool
	// zeroPages: `runsc checkpoint --exclude-committed-zero-pages` leaves
	// out of the image the pages that were touched but hold only zeros
	// (a freed heap, zeroed buffers), which an uncompressed image would
	// store whole; the restore needs nothing for it (the sentry maps them
	// as zero).
	zeroPages bool
	// background: `runsc restore --background` returns once the kernel's
	// state is loaded and lets the memory's pages load after it, from an
	// uncompressed image only; and `runsc wait --restore` says when that
	// load has ended, which Warden must know to hold the server's copy
	// slot while the image is read (Runtime.Loaded).
	background bool
	// savesListeners: its checkpoint saves a listening TCP socket, such as
	// the egress bridge's on the box's loopback (over the stream). runsc
	// 2022-12-19 cannot (its checkpoint fails "encoding error at object
	// tcp.endpoint" and ends the box); the runsc of 2026-09-05 can (both
	// seen in TestCheckpointEgress). Neither says so, so it is told by the
	// flag the newer one has and the older lacks (--compression).
	savesListeners bool
}

// runscKey names one runsc binary: its path and which file is there (its
// device, inode, size and modification time), so a binary replaced at
// the same path (make runsc with a new pin while warden serve runs) is a
// new key, asked again, while what was learnt of the old file stays with
// it. It keys every per-binary cache: features (featureCache), the
// default platform (Runtime.platform) and the control probe
// (Runtime.speaksControl).
type runscKey struct {
	path       string
	dev, ino   uint64
	size       int64
	mtimeNanos int64
}

// runscKeyOf is the key of the file at path now.
func runscKeyOf(path string) (runscKey, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return runscKey{}, fmt.Errorf("reading which runsc binary %q is: %w", path, err)
	}
	key := runscKey{path: path, size: fi.Size(), mtimeNanos: fi.ModTime().UnixNano()}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		key.dev, key.ino = st.Dev, st.Ino
	}
	return key, nil
}

// featureCache holds features by runscKey: runsc is asked once per
// binary for the process's life.
var featureCache sync.Map

// runscFeatures says what the runsc at path supports, from the flags its
// `help checkpoint` and `help restore` list, once per binary. A failure
// to ask is returned, not cached, and the caller fails: a runsc that
// cannot print its help would not checkpoint either.
func runscFeatures(ctx context.Context, path string) (features, error) {
	key, err := runscKeyOf(path)
	if err != nil {
		return features{}, fmt.Errorf("asking runsc what it supports: %w", err)
	}
	if f, ok := featureCache.Load(key); ok {
		return f.(features), nil
	}
	// One bound for the whole probe: a runsc that hangs costs a caller
	// (a snapshot's SavesMemory) killTimeout, not one per command.
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	ckpt, err := runscFlags(ctx, path, "checkpoint")
	if err != nil {
		return features{}, err
	}
	rest, err := runscFlags(ctx, path, "restore")
	if err != nil {
		return features{}, err
	}
	wait, err := runscFlags(ctx, path, "wait")
	if err != nil {
		return features{}, err
	}
	// A value runsc does not list is never passed: it would fail the
	// checkpoint only after the stream was cut. A runsc listing neither
	// is given no --compression and writes by its own default, whatever
	// that is: save records the kind from the files it wrote.
	usage, compression := ckpt["compression"]
	_, zeroPages := ckpt["exclude-committed-zero-pages"]
	f := features{uncompressed: compression && listsValue(usage, runscNone), flate: compression && listsValue(usage, runscFlateBestSpeed),
		savesListeners: compression, zeroPages: zeroPages}
	// --background needs an image without compression, so it is used only
	// where Warden can write one, and only where runsc can say when the
	// load has ended.
	_, background := rest["background"]
	_, waits := wait["restore"]
	f.background = f.uncompressed && background && waits
	featureCache.Store(key, f)
	return f, nil
}

// runsc's --compression values Warden passes, one for each Compression.
const (
	// runscNone writes the memory uncompressed (CompressionNone).
	runscNone = "none"
	// runscFlateBestSpeed flate-compresses it (CompressionFast).
	runscFlateBestSpeed = "flate-best-speed"
)

// compression is the --compression value Checkpoint passes a runsc of
// features f asked for c, and whether the image is then uncompressed
// (record.Uncompressed). The value is said wherever runsc lists one
// Warden knows, not left to its default, which a release may change; ""
// for a runsc without the flag (2022-12-19), which always compresses. A
// runsc that cannot write what c asks writes what it can (the operator
// was warned: WritesCompression); save then records the kind from the
// files runsc wrote, so either kind restores.
func (f features) compression(c Compression) (value string, uncompressed bool) {
	switch {
	case c == CompressionFast && f.flate:
		return runscFlateBestSpeed, false
	case f.uncompressed:
		return runscNone, true
	case f.flate:
		return runscFlateBestSpeed, false
	}
	return "", false
}

// WritesCompression says why this Runtime's runsc, asked for c, would
// write a memory image of the other kind, or nil: only its help tells
// (a runsc whose --compression lacks flate-best-speed writes them
// uncompressed, runsc 2022-12-19 always compressed). A runsc that cannot
// be found or probed is that error.
func (r *Runtime) WritesCompression(c Compression) error {
	runsc, err := r.runscPath()
	if err != nil {
		return err
	}
	f, err := runscFeatures(context.Background(), runsc)
	if err != nil {
		return err
	}
	_, uncompressed := f.compression(c)
	switch {
	case c == CompressionFast && uncompressed:
		return fmt.Errorf("%s cannot flate-compress a checkpoint (its --compression lists no %s): snapshots' memory is written uncompressed; use a runsc that can (make runsc)", runsc, runscFlateBestSpeed)
	case c != CompressionFast && !uncompressed:
		return fmt.Errorf("%s cannot write a checkpoint uncompressed (its checkpoint has no --compression %s): snapshots' memory is written compressed and resumes read it whole; use a runsc that can (make runsc)", runsc, runscNone)
	}
	return nil
}

// maxHelp bounds what of runsc's help is read: the rest is left unread
// (runsc then ends on a closed pipe, or at killTimeout).
const maxHelp = 64 << 10

// runscFlags are the flags `runsc help cmd` lists, by name, with their
// usage (parseFlags), bounded by ctx.
func runscFlags(ctx context.Context, path, cmd string) (map[string]string, error) {
	out, err := readHelp(ctx, path, cmd)
	if err != nil {
		return nil, fmt.Errorf("asking runsc what %s supports (runsc help %s): %w", cmd, cmd, err)
	}
	return parseFlags(out), nil
}

// readHelp is at most maxHelp bytes of `runsc help cmd`'s output, read
// from its pipe as it comes, and its exit's error.
func readHelp(ctx context.Context, path, cmd string) ([]byte, error) {
	c := exec.CommandContext(ctx, path, "help", cmd)
	c.WaitDelay = killTimeout
	stdout, err := c.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	out, rerr := io.ReadAll(io.LimitReader(stdout, maxHelp))
	// Closing the pipe ends a runsc that would print more.
	if cerr := stdout.Close(); cerr != nil && rerr == nil {
		rerr = cerr
	}
	if err := c.Wait(); err != nil && len(out) < maxHelp {
		return nil, err
	}
	return out, rerr
}

// parseFlags are the flags of a Go flag package's usage, by name, with
// their usage: each flag's line is "  -name" and its value's type, and
// its usage follows on lines indented with four spaces and a tab.
func parseFlags(help []byte) map[string]string {
	flags := map[string]string{}
	last := ""
	sc := bufio.NewScanner(bytes.NewReader(help))
	for sc.Scan() {
		line := sc.Text()
		if usage, ok := strings.CutPrefix(line, "    \t"); ok {
			if last != "" {
				flags[last] = strings.TrimSpace(flags[last] + " " + usage)
			}
			continue
		}
		last = ""
		rest, ok := strings.CutPrefix(line, "  -")
		if f := strings.Fields(rest); ok && len(f) > 0 {
			last = f[0]
			flags[last] = ""
		}
	}
	return flags
}

// listsValue says whether a flag's usage lists value among its values,
// as runsc words them ("Values: none|flate-best-speed.").
func listsValue(usage, value string) bool {
	_, list, ok := strings.Cut(usage, "Values:")
	if !ok {
		return false
	}
	list, _, _ = strings.Cut(strings.TrimSpace(list), " ")
	return slices.Contains(strings.Split(strings.TrimSuffix(list, "."), "|"), value)
}

// SavesEgress says why a box of this Runtime with the egress proxy cannot
// be checkpointed, or nil: over descriptors its link is a host socket,
// and an older runsc cannot save its bridge's listening socket
// (features.savesListeners). A runsc whose help cannot be read is
// refused with the probe's error, so a box is refused rather than ended.
func (r *Runtime) SavesEgress() error {
	if !r.Stream {
		return r.savesEgress("", features{})
	}
	runsc, err := r.runscPath()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCannotCheckpoint, err)
	}
	f, err := runscFeatures(context.Background(), runsc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCannotCheckpoint, err)
	}
	return r.savesEgress(runsc, f)
}

// savesEgress is SavesEgress for the runsc at path, which supports f:
// Checkpoint asks it of the box's own runsc, the one that saves it.
func (r *Runtime) savesEgress(runsc string, f features) error {
	if !r.Stream {
		return fmt.Errorf("%w: over the descriptor transport its link to the egress proxy is a host socket gVisor cannot save (checkpoint it over the stream transport, or a box with network mode none)", ErrCannotCheckpoint)
	}
	if !f.savesListeners {
		return fmt.Errorf("%w: its egress bridge listens on the box's loopback, and %s cannot save a listening socket (a newer runsc, one whose checkpoint has --compression, can: make runsc)", ErrCannotCheckpoint, runsc)
	}
	return nil
}
