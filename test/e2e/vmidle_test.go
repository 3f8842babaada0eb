package e2e

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/vmbox"
)

// idleBoxes is how many idle microvm sessions TestMicrovmIdleMemory
// measures side by side.
const idleBoxes = 3

// TestMicrovmIdleMemory measures what an idle microvm session costs the
// host at the default limits (docs/backends.md quotes it): each QEMU's
// PSS and RSS (smaps_rollup), its scratch tmpfs's used bytes, and the
// guest's own view (MemTotal less MemAvailable), after one exec and a
// few seconds' rest. A measurement, not a check: run it with -long -v.
func TestMicrovmIdleMemory(t *testing.T) {
	if !*longLoad {
		t.Skip("a measurement: go test ./test/e2e -run TestMicrovmIdleMemory -long -v")
	}
	requireBackend(t, "microvm")
	s := startServer(t, "--backend", "microvm")
	for range idleBoxes {
		id := s.newSession(t, keyA, nil)
		var r spec.Result
		s.jsonCall(t, keyA, http.MethodPost, "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"cat", "/proc/meminfo"}}, http.StatusOK, &r)
		total, avail := meminfoKiB(r.Stdout, "MemTotal:"), meminfoKiB(r.Stdout, "MemAvailable:")
		t.Logf("guest: MemTotal %d KiB, MemAvailable %d KiB, used %.1f MiB", total, avail, float64(total-avail)/1024)
	}
	time.Sleep(5 * time.Second) // let the guests settle idle; no figure is checked against time
	qemus := childrenNamed(t, s.pid, "qemu-system-x86")
	if len(qemus) != idleBoxes {
		t.Fatalf("found %d QEMU processes under warden serve, want %d", len(qemus), idleBoxes)
	}
	for _, pid := range qemus {
		rollup, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("QEMU %d: Pss %.1f MiB, Rss %.1f MiB", pid, float64(meminfoKiB(string(rollup), "Pss:"))/1024, float64(meminfoKiB(string(rollup), "Rss:"))/1024)
	}
	scratches, err := filepath.Glob(filepath.Join(vmbox.StateDir, "box-"+boxname.Prefix+strconv.Itoa(s.pid)+"-*", "scratch"))
	if err != nil || len(scratches) != idleBoxes {
		t.Fatalf("scratches of warden serve's boxes = %v, %v; want %d", scratches, err, idleBoxes)
	}
	for _, dir := range scratches {
		var st unix.Statfs_t
		if err := unix.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		t.Logf("scratch %s: %d KiB used of %d MiB", filepath.Base(filepath.Dir(dir)), (st.Blocks-st.Bfree)*uint64(st.Bsize)>>10, st.Blocks*uint64(st.Bsize)>>20)
	}
}

// meminfoKiB is the number after key in a /proc/meminfo-style text.
func meminfoKiB(text, key string) int64 {
	for _, line := range strings.Split(text, "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == key {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return n
		}
	}
	return 0
}

// childrenNamed lists the children of pid whose comm is comm.
func childrenNamed(t *testing.T, pid int, comm string) []int {
	t.Helper()
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/children")
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread ended
		}
		for _, c := range strings.Fields(string(b)) {
			n, err := strconv.Atoi(c)
			if err != nil {
				continue
			}
			name, err := os.ReadFile("/proc/" + c + "/comm")
			if err == nil && strings.TrimSpace(string(name)) == comm && !slices.Contains(out, n) {
				out = append(out, n)
			}
		}
	}
	return out
}
