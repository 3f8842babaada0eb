package templatetest

import (
	"archive/tar"
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
)

// entry is one entry of a committed layer: a directory (a name ending in
// /), a link (link set) or a file of body.
type entry struct {
	name, body, link string
	mode             int64
}

// seededEntries are the committed layer's entries: a home file, a private
// directory and file only their owner may read (as ~/.ssh would be, so a
// copy that cannot read what the store made root's shows), a link, and
// a /workspace file.
var seededEntries = []entry{
	{"home/", "", "", 0o755},
	{"home/sandbox/", "", "", 0o755},
	{"home/sandbox/seeded.txt", "from the template\n", "", 0o644},
	{"home/sandbox/.private/", "", "", 0o700},
	{"home/sandbox/.private/key", "secret\n", "", 0o600},
	{"home/sandbox/link", "", "seeded.txt", 0o777},
	{"workspace/", "", "", 0o755},
	{"workspace/in.csv", "a,b\n1,2\n", "", 0o644},
}

// SeededScript, run by sh in a session on a Seeded template, reads every
// seeded file, writes the home's (a seeded file is the session's own to
// change) and prints SeededWant.
const SeededScript = "cat ~/seeded.txt ~/link ~/.private/key /workspace/in.csv && " +
	"echo more >> ~/seeded.txt && tail -1 ~/seeded.txt && rm ~/.private/key && echo removed"

// SeededWant is what SeededScript prints.
const SeededWant = "from the template\nfrom the template\nsecret\na,b\n1,2\nmore\nremoved\n"

// Seeded imports the test image base into a store of the test's own
// and commits on it, as warden template commit would, a template "seeded"
// with one more layer holding a home and /workspace (seededEntries); it
// returns the template's root as the Manager resolves it.
func Seeded(t testing.TB, base string) spec.Root {
	t.Helper()
	st, _ := ImportNew(t, base)
	return CommitSeeded(t, st, base, "seeded")
}

// ImportNew imports the test image name into a store of the test's own
// and returns the store and the template's root as the Manager resolves
// it (leased until the test ends).
func ImportNew(t testing.TB, name string) (*template.Store, spec.Root) {
	t.Helper()
	layout, _ := Image(t, name)
	st, err := template.Open(t.TempDir(), template.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return st, Import(t, st, name, layout)
}

// CommitSeeded commits to st a template name: base (already in st) with
// one more layer holding seededEntries, as warden template commit would.
func CommitSeeded(t testing.TB, st *template.Store, base, name string) spec.Root {
	t.Helper()
	return commit(t, st, base, name, seededEntries)
}

// CommitFiles commits to st a template name: base with a home of n small
// files in ten directories, for measuring what seeding costs per file.
func CommitFiles(t testing.TB, st *template.Store, base, name string, n int) spec.Root {
	t.Helper()
	ents := []entry{{"home/", "", "", 0o755}, {"home/sandbox/", "", "", 0o755}}
	for d := range min(n, 10) {
		ents = append(ents, entry{fmt.Sprintf("home/sandbox/d%d/", d), "", "", 0o755})
	}
	for i := range n {
		ents = append(ents, entry{fmt.Sprintf("home/sandbox/d%d/f%d", i%10, i), "some data\n", "", 0o644})
	}
	return commit(t, st, base, name, ents)
}

// commit commits name on base in st with a layer of ents.
func commit(t testing.TB, st *template.Store, base, name string, ents []entry) spec.Root {
	t.Helper()
	bt, err := st.Get(base)
	if err != nil {
		t.Fatal(err)
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for _, e := range ents {
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: time.Unix(1700000000, 0), Uid: 1000, Gid: 1000}
		switch {
		case e.name[len(e.name)-1] == '/':
			h.Typeflag = tar.TypeDir
		case e.link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.link
		default:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	info, err := st.Commit(base, bt.Digest, &layer, name, []string{template.Everyone})
	if err != nil {
		t.Fatalf("committing %s on %s: %v", name, base, err)
	}
	return spec.Root{Template: name, Dir: info.Root, Digest: info.Digest, Env: info.Config.Env}
}
