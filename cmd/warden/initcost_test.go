package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// maxOwnInitBytes bounds what any of Warden's own packages may allocate
// at package init in the slim build. The largest today is a few KB of
// tables; a regexp compiled at package level costs tens of KB, paid by
// every `warden run` whether it uses the regexp or not (docs/performance.md,
// "Where the start-up time goes": compile at first use instead).
const maxOwnInitBytes = 8 << 10

// maxInitBytes bounds what the package init of everything bin/warden
// links allocates, the libraries' included: about 69 KB since template
// pull and import went to warden-server, against 200 KB while
// go-containerregistry's registry client and image formats (go-digest's
// regexps alone 92 KB) were linked. A heavy library coming back to the
// run path fails here, whichever package brings it.
const maxInitBytes = 128 << 10

// TestSlimInitIsLight: none of Warden's packages linked into bin/warden
// does heavy work at package init, and all the packages' inits together
// stay light, as GODEBUG=inittrace=1 reports them. It counts allocated
// bytes, which do not depend on the host's load.
func TestSlimInitIsLight(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	bin := filepath.Join(t.TempDir(), "warden")
	build := exec.Command(goTool, "build", "-tags", "slim", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the slim warden: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "version")
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("warden version: %v\n%s", err, out)
	}
	seen, total, heaviest, most := 0, 0, "", 0
	for line := range strings.Lines(string(out)) {
		pkg, bytes, ok := initBytes(line)
		if !ok {
			continue
		}
		total += bytes
		if bytes > most {
			heaviest, most = pkg, bytes
		}
		if !strings.HasPrefix(pkg, "github.com/warden-sandbox/warden/") {
			continue
		}
		seen++
		if bytes > maxOwnInitBytes {
			t.Errorf("package init of %s allocates %d bytes, want at most %d: make its package-level state lazy", pkg, bytes, maxOwnInitBytes)
		}
	}
	if seen == 0 {
		t.Fatalf("no init line of Warden's packages in the trace:\n%s", out)
	}
	if total > maxInitBytes {
		t.Errorf("package init of the slim warden allocates %d bytes in all (the most: %s, %d), want at most %d: keep heavy libraries off the run path (see TestSlimLinksNoServer)", total, heaviest, most, maxInitBytes)
	}
}

// initBytes parses one inittrace line, "init PKG @T ms, C ms clock, B
// bytes, A allocs", into the package and its bytes.
func initBytes(line string) (string, int, bool) {
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "init" || f[8] != "bytes," {
		return "", 0, false
	}
	n, err := strconv.Atoi(f[7])
	return f[1], n, err == nil
}
