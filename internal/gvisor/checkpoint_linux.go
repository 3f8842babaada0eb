package gvisor

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/streammux"
	"github.com/warden-sandbox/warden/internal/strictjson"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// A checkpoint is a directory holding everything a box needs to start
// again where it stood: runsc's image of the sandbox's memory and
// processes (checkpoint.img, and with a runsc that writes memory
// uncompressed pages.img and pages_meta.img), a copy of the box's scratch tmpfs
// (scratch/: /workspace, /tmp, the home, /dev/shm), which lives on the
// host outside gVisor's memory, and Warden's own record of it
// (warden-checkpoint.json).
const (
	checkpointImage  = "checkpoint.img"
	checkpointRecord = "warden-checkpoint.json"
	checkpointFiles  = "scratch"
	// checkpointPages and checkpointPagesMeta are the memory's pages and
	// their map, written by a runsc with features.uncompressed.
	checkpointPages     = "pages.img"
	checkpointPagesMeta = "pages_meta.img"
)

// checkpointFormat is the version of the record; Restore refuses others,
// asking for the checkpoint to be taken again. 2: taken by a warden
// whose agent may record each unfinished process's streams (format 1's
// numeric Unfinished would restore with their directions lost).
const checkpointFormat = 2

// record is what Warden keeps of a checkpoint beside runsc's image.
type record struct {
	Format int `json:"format"`
	// LastID is the checkpointed session's last process ID (see
	// agent.Frame.PriorIDs).
	LastID uint64 `json:"last_id"`
	// Unfinished are the session's processes that had not reported all
	// their events (agent.Frame.Prior).
	Unfinished agent.Unfinished `json:"unfinished,omitempty"`
	// RootDir and RootDigest name the box's root: a restored box must
	// mount the same one, which its processes have open.
	RootDir    string `json:"root_dir,omitempty"`
	RootDigest string `json:"root_digest,omitempty"`
	// ScratchBytes is what the box's scratch tmpfs held: a restored box
	// needs a disk limit at least this large.
	ScratchBytes int64 `json:"scratch_bytes"`
	// Stream is the box's agent transport (Runtime.Stream): the restored
	// agent goes on speaking the one it was saved with, so Restore
	// refuses a Runtime of the other rather than fail on a protocol
	// error. A record without it was taken over descriptors.
	Stream bool `json:"stream"`
	// ResumeNonce (hex) is a stream box's: the nonce its agent's quiesced
	// stream accepts a resume frame with (agent.Frame.ResumeNonce).
	ResumeNonce string `json:"resume_nonce,omitempty"`
	// Uncompressed says runsc wrote the memory uncompressed, as
	// checkpointPages and checkpointPagesMeta: set from the files runsc
	// wrote (settleRecord), whatever Runtime.Compression asked. Restore
	// follows it, never its own Runtime's setting, so either kind
	// restores on either. Only a runsc with features.uncompressed
	// restores such an image, and one with features.background loads its
	// pages after the restore returned.
	Uncompressed bool `json:"uncompressed,omitempty"`
	// Compression is the checkpoint --compression value runsc was given
	// (runscNone, runscFlateBestSpeed), "" for runsc 2022-12-19, which
	// has no such flag: a compressed image of a runsc that had it is
	// refused by one that has not (features.savesListeners) before its
	// restore, which could not read it.
	Compression string `json:"compression,omitempty"`
	// PagesBytes is checkpointPages' size as runsc wrote it: Restore
	// refuses one of another size (cut short on disk) before runsc reads
	// it. It sizes nothing on Warden's side.
	PagesBytes int64 `json:"pages_bytes,omitempty"`
	// Proxy says the box had the egress proxy (spec.NetProxy): its
	// restored processes keep the bridge and HTTP_PROXY they had, so
	// Restore refuses a spec of the other network mode, before runsc
	// starts, rather than let the box die on its first connection. A
	// record without it was of a box with network mode none: no warden
	// that wrote one without it could checkpoint a box with the proxy.
	Proxy bool `json:"proxy,omitempty"`
}

// CheckpointWait bounds a checkpoint and a restore's start: runsc saves
// or loads the whole of the box's memory, uncompressed at about 1 s per
// 200 MB measured; flate-compressed (CompressionFast) about 6 s per
// 200 MB of random bytes at load 16, paced by the box's own CPU quota,
// which is why a box its CPUs could not compress in half of it is saved
// uncompressed (compressionFor). A save cut here ends the session.
// Tests bound their own waits by it.
const CheckpointWait = 2 * time.Minute

// ErrCannotCheckpoint is wrapped by Checkpoint's error when it refused
// the box before runsc's save, for something gVisor cannot save: the box
// is untouched and runs on.
var ErrCannotCheckpoint = errors.New("this sandbox cannot be checkpointed")

// ErrSaveFailed is wrapped by Checkpoint's error when runsc's save itself
// failed: runsc 2022-12-19 then ends the box, so the session ends too.
var ErrSaveFailed = errors.New("runsc failed to save the sandbox, which ended")

// CheckpointOptions change what Checkpoint accepts.
type CheckpointOptions struct {
	// Running lets the checkpoint of a box over descriptors go on while
	// processes the session started still run. Each was given the host's
	// pipes, which gVisor cannot save, so only one that moved every
	// descriptor off them (a server started as `exec prog </dev/null
	// >/dev/null 2>&1`) can be saved; for any other runsc fails, and
	// runsc 2022-12-19 then ends the box (ErrSaveFailed). Set by a
	// caller that knows its processes' descriptors, never from user
	// input. A box over the stream saves its running processes whatever
	// it says: their pipes are the box's own.
	Running bool
}

// Checkpoint saves the whole box of sess, a session this Runtime started
// or restored, to dir, a directory it creates (it must not exist): the
// memory and processes of every task in it and a copy of its files. The
// box then ends, and so does sess (its Err wraps agent.ErrSaved): the
// caller closes it as usual. Restore starts a new box from dir, as many
// times as wanted (a fork). A session snapshot of a stream box calls it
// (sandbox.MemoryBackend).
//
// The box stays paused from before the copy of its files to the end of
// runsc's save, and the pause is held (agent.Session.WhilePaused):
// Resume, Close's resume and new processes wait for it. The caller must
// hold its own calls on the box's files (the workspace API) meanwhile.
// The copy opens every directory beneath the scratch without following
// a link (workspace.CopyTree), so nothing the box left there leads it to
// a host file.
//
// gVisor cannot save a descriptor that came from the host, except the
// init's stdin, which runsc gives again on restore, and a save that
// fails ends the box. So Checkpoint refuses, with ErrCannotCheckpoint
// and the box untouched, a box over descriptors with the egress proxy
// (its link is a host socket) and, over descriptors and unless
// o.Running, one with a process the session started still running (an
// exec, a persistent interpreter: they hold the host's pipes).
//
// Over the stream transport (Runtime.Stream) a box's way to the proxy is
// the stream's channels, so one with the proxy is saved where the box's
// runsc can save its bridge's listening socket (SavesEgress); the
// connections it had open through it are cut. Processes' pipes are the
// box's own, so running ones are saved: the session's stream is first
// cut where both ends stand still (agent.Session.Quiesce), and its nonce
// recorded for the restore, which takes the stream over; from the cut on
// the session takes no request (agent.ErrQuiesced), so a checkpoint of a
// stream box that fails after it ends the session
// (agent.ErrCheckpointFailed). The caller keeps its interpreters idle
// meanwhile. A save runsc itself fails (ErrSaveFailed) ends the box and
// sess. On any failure dir is removed.
func (r *Runtime) Checkpoint(ctx context.Context, sess *agent.Session, dir string, o CheckpointOptions) (err error) {
	b := r.boxOf(sess)
	if b == nil {
		return errors.New("checkpoint: the session is not a live box of this gvisor runtime")
	}
	feat, err := runscFeatures(ctx, b.runsc)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrCannotCheckpoint, err)
	}
	if b.att != nil {
		if err := r.savesEgress(b.runsc, feat); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return fmt.Errorf("checkpoint: making the image directory: %w", err)
	}
	defer func() {
		if err != nil {
			if rerr := os.RemoveAll(dir); rerr != nil {
				b.logger().Warn("removing a failed checkpoint's directory", "dir", dir, "err", rerr)
			}
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, CheckpointWait)
	defer cancel()
	// cleanup waits for the copy of the scratch, should the session be
	// closed meanwhile.
	b.dirMu.Lock()
	defer b.dirMu.Unlock()
	// The record is refused here, box untouched, if it would already be
	// too long for a Restore to read, with the longest of what save adds
	// after runsc ran; save checks it again after the cut.
	if _, err := encodeRecord(record{Format: checkpointFormat, LastID: sess.LastID(), Unfinished: sess.Unfinished(),
		RootDir: b.spec.Root.Dir, RootDigest: b.spec.Root.Digest, Stream: b.r.Stream, ResumeNonce: strings.Repeat("0", 2*streammux.ResumeNonceLen),
		Uncompressed: true, PagesBytes: math.MaxInt64, Compression: runscFlateBestSpeed, Proxy: b.spec.Network.Mode == spec.NetProxy}); err != nil {
		return err
	}
	var nonce []byte
	if b.r.Stream {
		if nonce, err = sess.Quiesce(ctx); err != nil {
			return fmt.Errorf("checkpoint: %w", err)
		}
	}
	// runsc saves only a box runsc paused, not a frozen one.
	b.pauseWithRunsc(true)
	defer b.pauseWithRunsc(false)
	// A box WhilePaused paused and fn failed on runs on, or, where
	// runsc's save failed, goes on to the end runsc gave it.
	err = sess.WhilePaused(ctx, func() (bool, error) {
		if n := sess.Running(); n > 0 && !o.Running && !b.r.Stream {
			return false, fmt.Errorf("%w: %d of its processes run with the host's pipes, which gVisor cannot save (a persistent interpreter or an exec): end them first", ErrCannotCheckpoint, n)
		}
		if err := b.stillForSave(ctx); err != nil {
			return false, err
		}
		if err := b.save(ctx, dir, feat, sess.LastID(), sess.Unfinished(), nonce); err != nil {
			return false, err
		}
		b.markSaved()
		return true, nil
	})
	if err != nil {
		err = cutError(b.r.Stream, err)
		// The cut stream cannot be joined again: the session fails closed.
		sess.EndCut(err)
		return err
	}
	return nil
}

// cutError is Checkpoint's error for err, met once its stream, if the
// box has one (stream), was cut: a refusal there (ErrCannotCheckpoint,
// such as a record grown too long with the scratch's real size) no
// longer leaves the box untouched, as the session ends with the cut, so
// it is told as agent.ErrCheckpointFailed and never as a refusal, which
// a caller takes for a box that runs on.
func cutError(stream bool, err error) error {
	if stream && errors.Is(err, ErrCannotCheckpoint) {
		return fmt.Errorf("checkpoint: %w: %s", agent.ErrCheckpointFailed, err.Error())
	}
	return fmt.Errorf("checkpoint: %w", err)
}

// save copies the paused box's scratch into dir, while nothing in the
// box can write, writes the record and has runsc save the box there
// (runsc saves a paused box as a running one), compressed or not as
// b.r.Compression asks where runsc can (feat): an uncompressed image's
// restore may load its pages in the background.
func (b *box) save(ctx context.Context, dir string, feat features, lastID uint64, unfinished agent.Unfinished, nonce []byte) error {
	used, err := scratchBytes(filepath.Join(b.dir, "scratch"))
	if err != nil {
		return err
	}
	files := filepath.Join(dir, checkpointFiles)
	if err := os.Mkdir(files, 0o700); err != nil {
		return fmt.Errorf("making the files' directory: %w", err)
	}
	// The copy's data is at most the tmpfs's, unless hard links copied
	// apart make it more: bounded by it, the box cannot fill the host.
	if _, err := workspace.CopyTree(ctx, filepath.Join(b.dir, "scratch"), files, used); err != nil {
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			return fmt.Errorf("the host's disk under %s is full: the box's files are %d bytes", dir, used)
		}
		return fmt.Errorf("copying the box's files: %w", err)
	}
	c := b.compression(feat)
	args, uncompressed := checkpointArgs(feat, c, dir, b.id)
	value, _ := feat.compression(c)
	if uncompressed {
		value = "" // the kind a record without the field names, so a warden without it reads the record
	}
	rec := record{Format: checkpointFormat, LastID: lastID, Unfinished: unfinished, RootDir: b.spec.Root.Dir, RootDigest: b.spec.Root.Digest,
		ScratchBytes: used, Stream: b.r.Stream, ResumeNonce: hex.EncodeToString(nonce), Uncompressed: uncompressed, Compression: value,
		Proxy: b.spec.Network.Mode == spec.NetProxy}
	if err := writeRecord(dir, rec); err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	if err := b.runscCtx(ctx, args...); err != nil {
		return checkpointError(err)
	}
	// The box has ended with runsc's save: a failure from here fails the
	// checkpoint, whose directory is removed.
	asked := rec.Uncompressed
	if err := settleRecord(dir, &rec); err != nil {
		return fmt.Errorf("%w: %w", ErrSaveFailed, err)
	}
	if rec.Uncompressed != asked {
		b.logger().Warn("runsc did not write the checkpoint's memory as it was asked; its record says what it wrote",
			"box", b.id, "asked_uncompressed", asked, "uncompressed", rec.Uncompressed)
	}
	return nil
}

// compression is the compression b is checkpointed with by a runsc of
// features feat: b.r.Compression, unless compressionFor says the box's
// CPUs could not compress its memory in time, which is logged where it
// changes what runsc writes.
func (b *box) compression(feat features) Compression {
	c, why := compressionFor(b.r.Compression, b.spec.Limits)
	if _, uncompressed := feat.compression(c); why != "" && feat.flate && uncompressed {
		b.logger().Info("checkpointing uncompressed, not fast as --snapshot-compression asks", "box", b.id, "why", why)
	}
	return c
}

// settleRecord sets rec's kind from the files runsc wrote into dir,
// whatever it was asked (runsc tells an image's kind by its pages map,
// checkpointPagesMeta), with the size of the pages of an uncompressed
// one, and writes it there if it changed: a runsc that ignored what it was asked
// leaves a record that restores, not one checkImage refuses.
func settleRecord(dir string, rec *record) error {
	was := rec.Uncompressed
	_, err := os.Lstat(filepath.Join(dir, checkpointPagesMeta))
	switch {
	case err == nil:
		rec.Uncompressed = true
	case errors.Is(err, os.ErrNotExist):
		rec.Uncompressed, rec.PagesBytes = false, 0
	default:
		return fmt.Errorf("checking runsc's image: %w", err)
	}
	if !rec.Uncompressed && !was {
		return nil
	}
	if rec.Uncompressed {
		if rec.PagesBytes, err = pagesBytes(dir); err != nil {
			return err
		}
	}
	if err := writeRecord(dir, *rec); err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	return nil
}

// checkpointArgs are runsc's arguments to save box id into dir with a
// runsc of features feat asked for compression c, and whether the image
// will be uncompressed (features.compression).
func checkpointArgs(feat features, c Compression, dir, id string) (args []string, uncompressed bool) {
	args = []string{"checkpoint"}
	value, uncompressed := feat.compression(c)
	if value != "" {
		args = append(args, "--compression", value)
	}
	if feat.zeroPages {
		args = append(args, "--exclude-committed-zero-pages")
	}
	return append(args, "--image-path", dir, id), uncompressed
}

// pagesBytes is the size of the pages runsc wrote uncompressed into dir,
// which must be there with their map.
func pagesBytes(dir string) (int64, error) {
	if _, err := regularSize(dir, checkpointPagesMeta); err != nil {
		return 0, err
	}
	return regularSize(dir, checkpointPages)
}

// regularSize is the size of dir's regular file name, which runsc wrote.
func regularSize(dir, name string) (int64, error) {
	fi, err := os.Lstat(filepath.Join(dir, name))
	if err != nil {
		return 0, fmt.Errorf("runsc wrote no %s of the memory uncompressed: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("runsc's %s is a %s, not a regular file", name, fi.Mode().Type())
	}
	return fi.Size(), nil
}

// scratchBytes is what the scratch tmpfs at dir holds.
func scratchBytes(dir string) (int64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, fmt.Errorf("measuring the box's files: %w", err)
	}
	return int64(st.Blocks-st.Bfree) * st.Bsize, nil
}

// checkpointError is runsc checkpoint's error, told in one line where
// its cause is known (runsc's own is a dump of gVisor's state).
func checkpointError(err error) error {
	msg := err.Error()
	switch {
	case bytes.Contains([]byte(msg), []byte("host.inode is not savable")):
		return fmt.Errorf("%w: a process in it holds a descriptor from the host, which gVisor cannot save", ErrSaveFailed)
	case len(msg) > maxLogTail:
		msg = msg[:maxLogTail] + "…"
	}
	return fmt.Errorf("%w: runsc: %s", ErrSaveFailed, strings.Join(strings.Fields(msg), " "))
}

// Restore starts a new box of s from the checkpoint in dir (Checkpoint)
// and returns the session of its agent, which serves where it stood: the
// box's processes run on with their memory, its files are the copy's. s
// must be the checkpointed session's spec (its root above all). Of its
// limits only the cgroup's (memory, CPUs, PIDs) and the scratch tmpfs's
// (disk, inodes) apply to the new box; what the agent set up inside the
// box at its first start (its rlimits, its environment, the seccomp
// filter) comes back from the saved memory as it was, whatever s says
// now, and nothing checks that s matches it beyond the root and the
// network mode (record.Proxy): its rules are s's. dir is only
// read: it can be restored again. ctx bounds the restore's start, and
// Restore returns once runsc records the box running (awaitRestored),
// when the sandbox holds the image's files: dir may be removed from
// then on, even while the memory still loads (restoreArgs). Any
// Runtime refuses a checkpoint taken over the other transport
// (record.Stream). A stream box's agent resumes the stream its
// checkpoint quiesced (agent.Frame.ResumeNonce): the processes it still
// runs are the session's Live, to Adopt. A resume or fork of a session
// snapshot with memory calls it (sandbox.MemoryBackend).
//
// A box with the egress proxy (s.Network) gets a new socket on it with
// s's rules, whatever rules the checkpointed box had: its caller passes
// the session's spec of the moment (a rule changed live after the
// checkpoint holds). Connections that were open through the proxy at
// the checkpoint were cut with the old stream; new ones go out through
// the new socket.
//
// What repeats: every restored copy starts with the same memory, so a
// process's own random state (Python's random module, a seeded PRNG) goes
// on with the same numbers in each copy; the kernel's (getrandom(2),
// /dev/urandom) is gVisor's, drawn from the host's, and differs.
func (r *Runtime) Restore(ctx context.Context, s spec.Spec, dir string) (*agent.Session, error) {
	rec, err := readRecord(dir)
	if err != nil {
		return nil, err
	}
	if err := checkImage(dir, rec); err != nil {
		return nil, err
	}
	if rec.Stream != r.Stream {
		return nil, fmt.Errorf("%w: checkpoint %s was taken over the %s transport and this runtime uses the %s transport: restore it with a runtime of the transport it was taken with", spec.ErrInvalid, dir, transportName(rec.Stream), transportName(r.Stream))
	}
	if s.Network.Mode == spec.NetProxy && !rec.Stream {
		return nil, fmt.Errorf("%w: checkpoint %s was taken over the descriptor transport, which cannot save a box with the egress proxy: restore it with network none", spec.ErrInvalid, dir)
	}
	if want := recordMode(rec); s.Network.Mode != want {
		return nil, fmt.Errorf("%w: checkpoint %s was taken of a box with network mode %s, and the spec asks for %s: restore it with network mode %s", spec.ErrInvalid, dir, want, s.Network.Mode, want)
	}
	if rec.RootDir != s.Root.Dir || rec.RootDigest != s.Root.Digest {
		return nil, fmt.Errorf("%w: checkpoint %s was taken of a box on another root (%q), restore it with its own session's spec", spec.ErrInvalid, dir, rec.RootDir)
	}
	if s.Limits.DiskBytes < rec.ScratchBytes {
		return nil, diskError(rec.ScratchBytes)
	}
	b, tmpl, err := r.newBox(s)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, CheckpointWait)
	defer cancel()
	args, background, err := restoreArgs(ctx, b, rec, dir)
	if err != nil {
		return nil, err
	}
	fill := func(scratch string) error {
		_, err := workspace.CopyTree(ctx, filepath.Join(dir, checkpointFiles), scratch, s.Limits.DiskBytes)
		if errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EDQUOT) {
			return diskError(rec.ScratchBytes)
		}
		return err
	}
	if err := b.build(s, tmpl, fill); err != nil {
		b.cleanup()
		return nil, fmt.Errorf("restoring the box's files: %w", err)
	}
	// The restored box's bridge opens its channels on the new stream
	// (Frame.EgressChannels); they lead to a socket of its own, with s's
	// rules: the one its checkpointed box had was closed with it.
	if b.att, err = agent.AttachEgressFor(b.id, s); err != nil {
		b.cleanup()
		return nil, err
	}
	b.restored = true
	ctl, err := b.launch(args...)
	if err != nil {
		b.cleanup()
		return nil, err
	}
	b.ctl = ctl
	f := b.frame(s, ctl)
	f.Restored, f.PriorIDs, f.Prior = true, rec.LastID, rec.Unfinished
	if rec.Stream {
		// readRecord checked it decodes to a nonce of the right length
		f.ResumeNonce, _ = hex.DecodeString(rec.ResumeNonce)
	}
	sess, err := agent.Attach(ctx, f)
	if err != nil {
		return nil, b.explain(err)
	}
	if err := b.awaitRestored(ctx); err != nil {
		if cerr := sess.Close(); cerr != nil {
			b.logger().Warn("closing a box whose restore failed", "err", cerr)
		}
		return nil, err
	}
	if background {
		b.loaded = make(chan struct{})
		go b.awaitLoaded()
	}
	r.track(sess, b)
	return sess, nil
}

// restoreArgs are runsc's arguments to restore b from the checkpoint in
// dir of record rec. An uncompressed image loads its pages in the
// background where runsc can: runsc restore then returns once the
// kernel's state is loaded, and the box runs while its memory still
// loads, each page awaited on first touch. The sandbox reads the image
// through the descriptors runsc opened at the restore and closes them
// when the load is over, so removing, renaming or replacing dir or its
// files meanwhile (a snapshot's delete or sweep, another restore) changes
// nothing it reads; only a write into those very files would, and
// Warden writes an image once, into a directory it made (Checkpoint). A
// load that fails in the background (an image cut short or unreadable
// on disk) makes runsc kill the box's kernel and the session ends; until
// the kill, a process in the box touching a page that failed to load
// gets EIO from a system call or SIGBUS, and may answer meanwhile, after
// the resume or fork already answered success.
func restoreArgs(ctx context.Context, b *box, rec record, dir string) (args []string, background bool, err error) {
	args = []string{"restore", "--image-path", dir, "--bundle", b.dir, b.id}
	if !rec.Uncompressed && rec.Compression == "" {
		return args, false, nil
	}
	feat, err := runscFeatures(ctx, b.runsc)
	if err != nil {
		return nil, false, err
	}
	switch {
	case !rec.Uncompressed && !feat.savesListeners:
		return nil, false, fmt.Errorf("%w: checkpoint %s was written by a runsc with checkpoint --compression, whose images %s (without it) cannot read: restore it with the runsc that took it (--runsc)", spec.ErrInvalid, dir, b.runsc)
	case !rec.Uncompressed:
		return args, false, nil
	case !feat.uncompressed:
		return nil, false, fmt.Errorf("%w: checkpoint %s holds memory uncompressed, which %s cannot restore: restore it with the runsc that took it (--runsc)", spec.ErrInvalid, dir, b.runsc)
	case feat.background:
		return append([]string{"restore", "--background"}, args[1:]...), true, nil
	}
	return args, false, nil
}

func writeRecord(dir string, rec record) error {
	data, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, checkpointRecord), data, 0o600)
}

// encodeRecord is rec as written, refused (ErrCannotCheckpoint) when it
// is longer than Restore reads (maxRecord): a checkpoint Restore would
// refuse is not taken.
func encodeRecord(rec record) ([]byte, error) {
	data, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecord {
		return nil, fmt.Errorf("%w: its record would be %d bytes, over the %d a restore reads (%d processes unfinished): end some of its processes first", ErrCannotCheckpoint, len(data), maxRecord, len(rec.Unfinished))
	}
	return data, nil
}

// checkImage refuses a checkpoint of record rec whose image files are
// missing or no regular files, or whose pages are not the size the
// record says (or it says none: a save that ended between its record's
// two writes): runsc would fail only in the restore, or, where the pages
// load in the background, after Restore returned. A compressed image
// with a pages map beside it is refused too: runsc tells an image's kind
// by that file, and would read it as the uncompressed one the record
// says it is not.
func checkImage(dir string, rec record) error {
	names := []string{checkpointImage}
	switch {
	case !rec.Uncompressed:
		if err := checkNoPages(dir); err != nil {
			return err
		}
	case rec.PagesBytes <= 0:
		return fmt.Errorf("%w: checkpoint %s's record gives its pages no size, as a save that did not finish leaves it: take the checkpoint again", spec.ErrInvalid, dir)
	default:
		names = append(names, checkpointPagesMeta, checkpointPages)
	}
	for _, name := range names {
		fi, err := os.Lstat(filepath.Join(dir, name))
		switch {
		case err != nil:
			return fmt.Errorf("%w: checkpoint %s has no image %s (%w): take the checkpoint again", spec.ErrInvalid, dir, name, err)
		case !fi.Mode().IsRegular():
			return fmt.Errorf("%w: checkpoint %s's image %s is a %s, not a regular file: take the checkpoint again", spec.ErrInvalid, dir, name, fi.Mode().Type())
		case name == checkpointPages && fi.Size() != rec.PagesBytes:
			return fmt.Errorf("%w: checkpoint %s's image %s is %d bytes, its record says %d: the disk lost part of it, take the checkpoint again", spec.ErrInvalid, dir, name, fi.Size(), rec.PagesBytes)
		}
	}
	return nil
}

// checkNoPages refuses the checkpoint in dir, compressed by its record,
// if a pages map is beside its image (checkImage).
func checkNoPages(dir string) error {
	_, err := os.Lstat(filepath.Join(dir, checkpointPagesMeta))
	switch {
	case err == nil:
		return fmt.Errorf("%w: checkpoint %s's record says its memory is compressed, but %s is beside it: take the checkpoint again", spec.ErrInvalid, dir, checkpointPagesMeta)
	case !errors.Is(err, os.ErrNotExist):
		return fmt.Errorf("checking checkpoint %s's image: %w", dir, err)
	}
	return nil
}

// maxRecord bounds the record Restore reads.
const maxRecord = 64 << 10

// maxLastID bounds a record's last process ID: far above any session's,
// and far below where the next ID would wrap.
const maxLastID = 1 << 48

func readRecord(dir string) (record, error) {
	var rec record
	fd, err := unix.Open(filepath.Join(dir, checkpointRecord), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return rec, fmt.Errorf("%w: %s is not a gvisor checkpoint: %w", spec.ErrInvalid, dir, err)
	}
	f := os.NewFile(uintptr(fd), checkpointRecord)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return rec, fmt.Errorf("%w: the record of checkpoint %s is not a regular file", spec.ErrInvalid, dir)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxRecord+1))
	if err != nil {
		return rec, fmt.Errorf("reading the record of checkpoint %s: %w", dir, err)
	}
	if len(data) > maxRecord {
		return rec, fmt.Errorf("%w: the record of checkpoint %s is longer than %d bytes", spec.ErrInvalid, dir, maxRecord)
	}
	if err := strictjson.Decode(data, &rec); err != nil {
		return rec, fmt.Errorf("%w: the record of checkpoint %s: %w", spec.ErrInvalid, dir, err)
	}
	if rec.Format != checkpointFormat {
		return rec, fmt.Errorf("%w: checkpoint %s has format %d, this warden reads %d: take the checkpoint again", spec.ErrInvalid, dir, rec.Format, checkpointFormat)
	}
	if n, err := hex.DecodeString(rec.ResumeNonce); rec.Stream && (err != nil || len(n) != streammux.ResumeNonceLen) {
		return rec, fmt.Errorf("%w: checkpoint %s of a stream box has no resume nonce of %d bytes: take it again", spec.ErrInvalid, dir, streammux.ResumeNonceLen)
	}
	if rec.LastID > maxLastID {
		return rec, fmt.Errorf("%w: checkpoint %s's last process ID %d is above %d", spec.ErrInvalid, dir, rec.LastID, uint64(maxLastID))
	}
	return rec, nil
}

// transportName names the agent transport stream says, as Restore's
// refusal of a mismatch does.
func transportName(stream bool) string {
	if stream {
		return "stream"
	}
	return "descriptor"
}

// recordMode is the network mode of the box rec is a checkpoint of.
func recordMode(rec record) spec.NetMode {
	if rec.Proxy {
		return spec.NetProxy
	}
	return spec.NetNone
}

// diskError is the refusal of a disk limit too small for a checkpoint's
// files of n bytes.
func diskError(n int64) error {
	return fmt.Errorf("%w: raise the disk limit to at least %d bytes; the checkpoint's files are %d", spec.ErrInvalid, n, n)
}

// track records sess as b's, for Checkpoint.
func (r *Runtime) track(sess *agent.Session, b *box) {
	r.boxesMu.Lock()
	defer r.boxesMu.Unlock()
	if r.boxes == nil {
		r.boxes = map[*agent.Session]*box{}
	}
	b.sess = sess
	r.boxes[sess] = b
}

// untrack forgets b, at its cleanup.
func (r *Runtime) untrack(b *box) {
	r.boxesMu.Lock()
	defer r.boxesMu.Unlock()
	if b.sess != nil && r.boxes[b.sess] == b {
		delete(r.boxes, b.sess)
	}
}

// boxOf is the live box of sess, or nil.
func (r *Runtime) boxOf(sess *agent.Session) *box {
	r.boxesMu.Lock()
	defer r.boxesMu.Unlock()
	return r.boxes[sess]
}
