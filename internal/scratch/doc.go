// Package scratch carries a session's writable scratch across templates:
// Layer writes what a session made in its home and /workspace as an image
// layer (for warden template commit), and Seed fills a new session's
// scratch from the same places in its template's root, so a session on a
// committed template starts with them. Both read only through os.Root,
// so no link a sandbox or an image made can take them outside the tree
// they walk.
package scratch

import "errors"

// ErrTooLarge is what Layer fails with past its byte cap.
var ErrTooLarge = errors.New("the session's files are larger than the cap")

// ErrNoSpace is what Seed fails with when a template's home and
// /workspace do not fit the sandbox's scratch: its disk limit in bytes or
// in inodes.
var ErrNoSpace = errors.New("it does not fit the sandbox's disk limit (bytes or inodes)")

// ErrLinkedPlace is what Seed, Layer and Seeds meet when a template's (or
// a scratch's) home or /workspace, or a directory above it, is a link or
// not a directory: following it would copy whatever it points at (the
// template's /etc/shadow, its /root) into the sandbox as the sandbox
// user's, so it is refused rather than skipped, and the user learns why
// the template starts no files.
var ErrLinkedPlace = errors.New("is a link or not a directory (make it a real directory in the image)")

// ErrSeedTooLarge is what Seed fails with, before copying anything, when
// a template's home and /workspace hold more than MaxSeedEntries entries
// or MaxSeedBytes bytes, whatever the sandbox's disk limit.
var ErrSeedTooLarge = errors.New("the template's home and /workspace are larger than a template may seed")

// ErrSeedSlow is what Seed fails with when the copy runs past
// MaxSeedTime.
var ErrSeedSlow = errors.New("copying the template's home and /workspace was too slow")

// Kept are the scratch directories (rootfs.ScratchDirs' keys) a commit
// keeps and a session on the template starts with: the sandbox user's
// home and /workspace. /tmp and /dev/shm are scratch by name: never kept.
var Kept = []string{"home", "workspace"}
