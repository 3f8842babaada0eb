package gvisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Excerpts of the two runscs' help, as they print it.
const (
	oldCheckpointHelp = `checkpoint [flags] <container id> - save current state of container.
  -image-path string
    	directory path to saved container image
  -leave-running
    	restart the container after checkpointing
`
	oldRestoreHelp = `restore [flags] <container id> - restore saved state of container.
  -bundle string
    	path to the root of the bundle directory, defaults to the current directory
  -image-path string
    	directory path to saved container image
`
	newCheckpointHelp = `checkpoint [flags] <container id> - save current state of container.
  -compression value
    	compress checkpoint image on disk. Values: none|flate-best-speed. (default none)
  -direct
    	use O_DIRECT for writing checkpoint pages file
  -exclude-committed-zero-pages
    	exclude committed zero-filled pages from checkpoint
  -image-path string
    	directory path to saved container image
`
	// A runsc whose --compression has no value none.
	noneRefusedHelp = `checkpoint [flags] <container id> - save current state of container.
  -compression value
    	compress checkpoint image on disk. Values: flate-best-speed|flate-best-size. (default flate-best-speed)
  -image-path string
    	directory path to saved container image
`
	// A runsc whose --compression has no value flate-best-speed.
	noFlateHelp = `checkpoint [flags] <container id> - save current state of container.
  -compression value
    	compress checkpoint image on disk. Values: none|zstd. (default none)
  -image-path string
    	directory path to saved container image
`
	newRestoreHelp = `restore [flags] <container id> - restore saved state of container.
  -background
    	allow image loading to continue after restore exits (requires uncompressed checkpoint)
  -bundle string
    	path to the root of the bundle directory, defaults to the current directory
  -image-path string
    	directory path to saved container image
`
	oldWaitHelp = `wait [flags] <container id>  -pid int
    	select a PID in the container's PID namespace to wait on instead of the container's root process (default -1)
  -rootpid int
    	select a PID in the sandbox root PID namespace to wait on instead of the container's root process (default -1)
`
	newWaitHelp = `wait [flags] <container id>
  -checkpoint
    	wait for the next checkpoint to complete
  -restore
    	wait for the restore to complete
`
)

// fakeRunsc writes a runsc that prints checkpoint, restore and wait as
// its help of those commands.
func fakeRunsc(t *testing.T, checkpoint, restore, wait string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{"checkpoint": checkpoint, "restore": restore, "wait": wait} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "runsc")
	script := "#!/bin/sh\n[ \"$1\" = help ] || exit 2\nexec cat \"" + dir + "/$2\"\n"
	if err := os.WriteFile(path, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestParseFlags: the flags of a help with their usage, not words of
// their usage.
func TestParseFlags(t *testing.T) {
	tests := []struct {
		help string
		want map[string]string
	}{
		{oldCheckpointHelp, map[string]string{"image-path": "directory path to saved container image", "leave-running": "restart the container after checkpointing"}},
		{newCheckpointHelp, map[string]string{
			"compression":                  "compress checkpoint image on disk. Values: none|flate-best-speed. (default none)",
			"direct":                       "use O_DIRECT for writing checkpoint pages file",
			"image-path":                   "directory path to saved container image",
			"exclude-committed-zero-pages": "exclude committed zero-filled pages from checkpoint",
		}},
		{oldWaitHelp, map[string]string{"rootpid": "select a PID in the sandbox root PID namespace to wait on instead of the container's root process (default -1)"}},
		{"    \t-background in a usage\n-compression unindented\n  -h\tshort\n", map[string]string{"h": ""}},
	}
	for _, tt := range tests {
		if got := parseFlags([]byte(tt.help)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseFlags(%.40q…) = %v, want %v", tt.help, got, tt.want)
		}
	}
}

// TestRunscFeatures: Debian's runsc gets today's checkpoint and restore,
// a runsc with --compression, --background and wait --restore the
// uncompressed image and the background load, one with --compression
// alone, or without wait --restore (whose load's end Warden could not
// tell), no background, one whose --compression lacks none compressed
// images only, one whose --compression lacks flate-best-speed
// uncompressed ones only; a runsc whose help fails is an error.
func TestRunscFeatures(t *testing.T) {
	tests := []struct {
		name, checkpoint, restore, wait string
		want                            features
	}{
		{"runsc 2022-12-19", oldCheckpointHelp, oldRestoreHelp, oldWaitHelp, features{}},
		{"newer runsc", newCheckpointHelp, newRestoreHelp, newWaitHelp, features{uncompressed: true, flate: true, zeroPages: true, background: true, savesListeners: true}},
		{"compression without background", newCheckpointHelp, oldRestoreHelp, newWaitHelp, features{uncompressed: true, flate: true, zeroPages: true, savesListeners: true}},
		{"background without wait --restore", newCheckpointHelp, newRestoreHelp, oldWaitHelp, features{uncompressed: true, flate: true, zeroPages: true, savesListeners: true}},
		{"background without compression", oldCheckpointHelp, newRestoreHelp, newWaitHelp, features{}},
		{"compression without none", noneRefusedHelp, newRestoreHelp, newWaitHelp, features{flate: true, savesListeners: true}},
		{"compression without flate", noFlateHelp, newRestoreHelp, newWaitHelp, features{uncompressed: true, background: true, savesListeners: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := runscFeatures(context.Background(), fakeRunsc(t, tt.checkpoint, tt.restore, tt.wait))
			if err != nil || got != tt.want {
				t.Errorf("runscFeatures() = %+v, %v, want %+v", got, err, tt.want)
			}
		})
	}
	broken := filepath.Join(t.TempDir(), "runsc")
	if err := os.WriteFile(broken, []byte("#!/bin/sh\nexit 1\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	if _, err := runscFeatures(context.Background(), broken); err == nil || !strings.Contains(err.Error(), "runsc help checkpoint") {
		t.Errorf("runscFeatures(a failing runsc) = %v, want an error naming runsc help checkpoint", err)
	}
}

// TestRestoreArgs: an uncompressed image restores in the background with
// a runsc that can, without it with one that cannot, and is refused by
// Debian's runsc, which cannot read it; a compressed one restores as
// today with either, unless a runsc with --compression wrote it: Debian's
// then refuses it too.
func TestRestoreArgs(t *testing.T) {
	oldRunsc := fakeRunsc(t, oldCheckpointHelp, oldRestoreHelp, oldWaitHelp)
	newRunsc := fakeRunsc(t, newCheckpointHelp, newRestoreHelp, newWaitHelp)
	noBackground := fakeRunsc(t, newCheckpointHelp, oldRestoreHelp, newWaitHelp)
	tests := []struct {
		name, runsc  string
		uncompressed bool
		compression  string
		want         string
		wantErr      string
	}{
		{name: "compressed, runsc 2022-12-19", runsc: oldRunsc, want: "restore --image-path D --bundle B id"},
		{name: "compressed, newer runsc", runsc: newRunsc, want: "restore --image-path D --bundle B id"},
		{name: "flate by a newer runsc, newer runsc", runsc: newRunsc, compression: runscFlateBestSpeed, want: "restore --image-path D --bundle B id"},
		{name: "flate by a newer runsc, runsc 2022-12-19", runsc: oldRunsc, compression: runscFlateBestSpeed, wantErr: "written by a runsc with checkpoint --compression"},
		{name: "uncompressed, newer runsc", runsc: newRunsc, uncompressed: true, want: "restore --background --image-path D --bundle B id"},
		{name: "uncompressed, runsc without background", runsc: noBackground, uncompressed: true, want: "restore --image-path D --bundle B id"},
		{name: "uncompressed, runsc 2022-12-19", runsc: oldRunsc, uncompressed: true, wantErr: "holds memory uncompressed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &box{runsc: tt.runsc, id: "id", dir: "B"}
			args, background, err := restoreArgs(context.Background(), b, record{Uncompressed: tt.uncompressed, Compression: tt.compression}, "D")
			switch {
			case tt.wantErr != "":
				if !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("restoreArgs() = %v, %v, want ErrInvalid saying %q", args, err, tt.wantErr)
				}
			case err != nil || strings.Join(args, " ") != tt.want || background != strings.Contains(tt.want, "--background"):
				t.Errorf("restoreArgs() = %q, %v, %v, want %q", strings.Join(args, " "), background, err, tt.want)
			}
		})
	}
}

// TestListsValue: a value counts only as a whole item of the usage's
// "Values:" list.
func TestListsValue(t *testing.T) {
	tests := []struct {
		usage string
		want  bool
	}{
		{"compress checkpoint image on disk. Values: none|flate-best-speed. (default none)", true},
		{"Values: flate-best-speed|none.", true},
		{"Values: nonesuch|flate-best-speed.", false},
		{"compress with none of the above", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := listsValue(tt.usage, "none"); got != tt.want {
			t.Errorf("listsValue(%q, none) = %v, want %v", tt.usage, got, tt.want)
		}
	}
}

// TestRunscFlagsEndlessHelp: a runsc whose help never ends is read to
// maxHelp and no further, and what was read counts.
func TestRunscFlagsEndlessHelp(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runsc")
	if err := os.WriteFile(path, []byte("#!/bin/sh\nexec yes '  -flag'\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := readHelp(context.Background(), path, "checkpoint")
	if err != nil || len(out) != maxHelp {
		t.Errorf("readHelp(endless) = %d bytes, %v; want %d, no error", len(out), err, maxHelp)
	}
	flags, err := runscFlags(context.Background(), path, "checkpoint")
	if _, ok := flags["flag"]; err != nil || !ok {
		t.Errorf("runscFlags(endless) = %v, %v; want flag", flags, err)
	}
}

// TestCheckpointArgs: Debian's runsc saves as ever, compressed, whatever
// is asked; a newer one saves uncompressed, or flate-compressed when
// asked (CompressionFast), without the pages that hold only zeros where
// it can; one that cannot write what is asked writes what it can, and
// says which.
func TestCheckpointArgs(t *testing.T) {
	newer := features{uncompressed: true, flate: true, zeroPages: true}
	tests := []struct {
		name             string
		feat             features
		c                Compression
		want             string
		wantUncompressed bool
	}{
		{"runsc 2022-12-19", features{}, CompressionNone, "checkpoint --image-path D id", false},
		{"runsc 2022-12-19, fast", features{}, CompressionFast, "checkpoint --image-path D id", false},
		{"newer runsc", newer, CompressionNone, "checkpoint --compression none --exclude-committed-zero-pages --image-path D id", true},
		{"newer runsc, default", newer, "", "checkpoint --compression none --exclude-committed-zero-pages --image-path D id", true},
		{"newer runsc, fast", newer, CompressionFast, "checkpoint --compression flate-best-speed --exclude-committed-zero-pages --image-path D id", false},
		{"uncompressed only", features{uncompressed: true}, CompressionNone, "checkpoint --compression none --image-path D id", true},
		{"uncompressed only, fast", features{uncompressed: true}, CompressionFast, "checkpoint --compression none --image-path D id", true},
		{"flate only", features{flate: true}, CompressionNone, "checkpoint --compression flate-best-speed --image-path D id", false},
		// runsc's own default then decides; save records what it wrote.
		{"flag listed, no value known", features{savesListeners: true}, CompressionFast, "checkpoint --image-path D id", false},
	}
	for _, tt := range tests {
		args, uncompressed := checkpointArgs(tt.feat, tt.c, "D", "id")
		if got := strings.Join(args, " "); got != tt.want || uncompressed != tt.wantUncompressed {
			t.Errorf("%s: checkpointArgs() = %q, uncompressed %v; want %q, %v", tt.name, got, uncompressed, tt.want, tt.wantUncompressed)
		}
	}
}

// TestCheckImageKind: a record's kind must match the files runsc tells
// an image's kind by: a compressed record beside a pages map, or an
// uncompressed one without its pages, is refused before runsc runs.
func TestCheckImageKind(t *testing.T) {
	write := func(t *testing.T, names ...string) string {
		dir := t.TempDir()
		for _, n := range names {
			if err := os.WriteFile(filepath.Join(dir, n), []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	tests := []struct {
		name    string
		files   []string
		rec     record
		wantErr string
	}{
		{"compressed", []string{checkpointImage}, record{}, ""},
		{"compressed beside a pages map", []string{checkpointImage, checkpointPagesMeta}, record{}, "says its memory is compressed"},
		{"compressed without its image", nil, record{}, "has no image"},
		{"uncompressed", []string{checkpointImage, checkpointPagesMeta, checkpointPages}, record{Uncompressed: true, PagesBytes: 1}, ""},
		{"uncompressed without pages", []string{checkpointImage}, record{Uncompressed: true, PagesBytes: 1}, "has no image"},
	}
	for _, tt := range tests {
		err := checkImage(write(t, tt.files...), tt.rec)
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("%s: checkImage() = %v, want nil", tt.name, err)
		case tt.wantErr != "" && (!errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("%s: checkImage() = %v, want ErrInvalid saying %q", tt.name, err, tt.wantErr)
		}
	}
}

// TestWritesCompression: the probe an operator is warned by says when a
// runsc would write the other kind of image than asked: fast on a runsc
// whose --compression lacks flate-best-speed, none on runsc 2022-12-19
// (which always compresses); nil where it writes what is asked.
func TestWritesCompression(t *testing.T) {
	newer := fakeRunsc(t, newCheckpointHelp, newRestoreHelp, newWaitHelp)
	old := fakeRunsc(t, oldCheckpointHelp, oldRestoreHelp, oldWaitHelp)
	noFlate := fakeRunsc(t, noFlateHelp, newRestoreHelp, newWaitHelp)
	tests := []struct {
		name, runsc string
		c           Compression
		wantErr     string
	}{
		{"newer, fast", newer, CompressionFast, ""},
		{"newer, none", newer, CompressionNone, ""},
		{"2022-12-19, fast", old, CompressionFast, ""},
		{"2022-12-19, none", old, CompressionNone, "cannot write a checkpoint uncompressed"},
		{"without flate, fast", noFlate, CompressionFast, "cannot flate-compress a checkpoint"},
		{"without flate, none", noFlate, CompressionNone, ""},
	}
	for _, tt := range tests {
		err := (&Runtime{Runsc: tt.runsc, Stream: true}).WritesCompression(tt.c)
		if (tt.wantErr == "" && err != nil) || (tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr))) {
			t.Errorf("%s: WritesCompression(%q) = %v, want %q", tt.name, tt.c, err, tt.wantErr)
		}
	}
}

// TestRunscKey: the same file at the same path is one key; a file
// replaced at that path (renamed over it, rewritten, or only touched) is
// another, so what was learnt of the old one is not taken for it; a path
// with no file is an error naming it.
func TestRunscKey(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(t *testing.T, path string)
		same   bool
	}{
		{name: "unchanged", change: func(*testing.T, string) {}, same: true},
		{name: "renamed over", change: func(t *testing.T, path string) {
			writeExec(t, path+".new", "#!/bin/sh\nexit 0\n")
			if err := os.Rename(path+".new", path); err != nil {
				t.Fatal(err)
			}
		}},
		{name: "rewritten", change: func(t *testing.T, path string) { writeExec(t, path, "#!/bin/sh\nexit 1\n# longer\n") }},
		{name: "touched", change: func(t *testing.T, path string) {
			if err := os.Chtimes(path, time.Time{}, time.Now().Add(time.Hour)); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "runsc")
			writeExec(t, path, "#!/bin/sh\nexit 0\n")
			before, err := runscKeyOf(path)
			if err != nil {
				t.Fatal(err)
			}
			tt.change(t, path)
			after, err := runscKeyOf(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := before == after; got != tt.same || after.path != path {
				t.Errorf("keys %+v then %+v: same %v, want %v, both of path %s", before, after, got, tt.same, path)
			}
		})
	}
	missing := filepath.Join(t.TempDir(), "runsc")
	if _, err := runscKeyOf(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("runscKeyOf(a missing file) = %v, want an error naming %s", err, missing)
	}
}

// writeExec writes an executable file at path.
func writeExec(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o700); err != nil {
		t.Fatal(err)
	}
}
