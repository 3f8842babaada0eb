// Package template is Warden's template store: named, read-only root
// trees made from OCI images, pulled from any registry (Pull), imported
// from a docker save archive or an OCI layout (Import), or made from a
// base and one more layer (Commit, for a session's changes), then listed
// (List, Get), removed (Remove) and collected (GC). Backends run a
// template from Template.Root; "host" (Host) is the host's own root, the
// default, and is never stored.
//
// # Storage
//
// The store is content-addressed: each layer is unpacked once, into
// layers/<diff id>/root, and shared by every template that uses it; the
// second template on the same base unpacks nothing (Info.Reused). A
// template's root (templates/<name>/rootfs) is a flattened tree: its
// directories are its own, every file and symlink a hard link to the
// layer's copy, and whiteouts and opaque directories are applied while
// flattening. The alternative, overlayfs with the layers as read-only
// lower directories, was rejected: it needs a mount per template to make,
// keep across restarts, and tear down (and one inside every sandbox's
// mount namespace or gVisor bundle), while a flattened tree is a plain
// directory every backend takes as is, costs no data copy (hard links
// share inodes, so the page cache is shared exactly as overlayfs would),
// and only a link per file and a directory per directory to make.
// Measured (TestMeasurePull, WARDEN_MEASURE=1) on a 211 MB image of real
// files, 14175 files and 1704 directories in 2 layers, on a loaded
// 2-core host: the first pull took 18.2 s; a second template on the same
// layers unpacked nothing and took 0.63 s (0.034x), all of it
// flattening; overlayfs mounts the same root in 1.8 ms, but the
// flattened tree is made once per template, not per mount, and adds
// only directories and links to the disk (two templates used 257 MB).
//
// # Hostile input
//
// Every layer is untrusted. It is verified while it streams (its
// uncompressed bytes must hash to the config's diff id, which the
// manifest's digest covers) and unpacked into a temporary directory,
// renamed into the store only when complete and verified; a failed pull
// removes its temporary files and the layers it added. Unpacking writes
// only through an os.Root (no name can resolve outside the layer), and:
//   - refuses names that are absolute or contain "..", names below a
//     symlink the layer made (writes never follow links), hard links to
//     anything but a regular file the same layer wrote earlier, unknown
//     entry types, and a whiteout naming nothing;
//   - drops device nodes and fifos with a warning (a template needs none:
//     backends provide /dev);
//   - strips set-uid and set-gid bits, and group and world write (every
//     file is owned by root, so no sandbox user may write a template;
//     the sandbox's writable places are Warden's scratch mounts); keeps a
//     directory's sticky bit;
//   - caps each pull's unpacked bytes (Options.MaxBytes, 4 GiB by
//     default; the manifest's declared layer sizes are checked against
//     it first, and a layer already stored counts too) and tar entries
//     (Options.MaxEntries), so a decompression bomb stops at the cap;
//   - makes directories 0700 while writing and gives them their modes
//     (always with owner read and search) only once the layer, or the
//     flattened template, is complete, deepest first: a directory made
//     read-only before later entries land in it would wedge a store not
//     run as root. Removal (GC, a failed pull) restores owner rwx first.
//
// An image's metadata is read whole into memory, so it is capped before
// it is read: a manifest may declare a config of at most 8 MiB (and
// under MaxBytes) and at most 128 layers, none listed twice. An imported
// OCI layout (a directory, or a tar unpacked under the same lock and
// budget as its layers) must hold only regular files and directories,
// so no symlink can point the import at the host's files, and its
// index.json and manifest are capped at 4 MiB; a docker save archive's
// headers are checked before it is read: no sparse entries, a
// manifest.json of at most 4 MiB, configs of at most 8 MiB, neither of
// them a link. Redirects
// from a registry to plain http after https, or to a loopback,
// link-local or private address, are refused unless the registry itself
// is on such an address. Flattening stops when the pull's context ends.
//
// Mutations take an exclusive flock on the store's lock file, so a CLI
// and a server may share a store. The store (state-dir/templates) is
// 0700 and owned by the operator; templates are read-only to sandboxes.
//
// # The slim build
//
// Pull and Import (pull.go, layout.go, redirect.go, and the installer's
// image side in install_image.go) are built only
// without the slim tag: go-containerregistry's registry client, image
// formats, compressors and Docker credential helpers, which they link,
// were a third of bin/warden's package init and paid by every `warden
// run`. The slim warden hands `warden template pull` and `import` to
// warden-server, the whole build, so its Pull and Import (pull_slim.go)
// only return an error saying so (wrapping errors.ErrUnsupported); it
// keeps everything else here (Get,
// Lease, List, Remove, GC, Share and Commit, which link only
// go-containerregistry's small pkg/v1 types).
package template
