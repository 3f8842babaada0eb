package workspace

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestIdentityRestored runs many operations as the sandbox user at once,
// then checks that every thread of the process is back to the process's
// own file identity and groups: no thread leaks the sandbox user's.
func TestIdentityRestored(t *testing.T) {
	testhost.RequireRoot(t)
	e := newEnv(t, sandboxID, sandboxID, Limits{})
	var wg sync.WaitGroup
	for i := range 32 {
		wg.Go(func() {
			p := filepath.Join("dir", string(rune('a'+i%26)), "f")
			if _, err := e.d.Write(p, strings.NewReader("x"), 0); err != nil {
				t.Error(err)
			}
			if _, err := e.d.List("dir"); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) == 0 {
		t.Fatalf("listing threads: %v", err)
	}
	// Real, effective, saved and file ids are all the process's; the
	// groups are the same on every thread.
	want := map[string]string{
		"Uid:": strings.Repeat(strconv.Itoa(os.Geteuid())+" ", 4),
		"Gid:": strings.Repeat(strconv.Itoa(os.Getegid())+" ", 4),
	}
	for _, task := range tasks {
		for _, line := range statusLines(t, task) {
			got := strings.Join(line[1:], " ") + " "
			if _, ok := want[line[0]]; !ok {
				want[line[0]] = got
			}
			if got != want[line[0]] {
				t.Errorf("%s: %s %s, want %s", task, line[0], got, want[line[0]])
			}
		}
	}
}

// statusLines returns the Uid, Gid and Groups lines of a status file, as
// fields.
func statusLines(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 0 && (f[0] == "Uid:" || f[0] == "Gid:" || f[0] == "Groups:") {
			out = append(out, f)
		}
	}
	return out
}
