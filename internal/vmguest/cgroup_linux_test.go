package vmguest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// limitBoxEnv, set in a child of TestLimitBox, names the cgroup v2
// directory the child runs limitBox in: limitBox moves its own process,
// which must not be the test's.
const limitBoxEnv = "WARDEN_TEST_LIMITBOX_ROOT"

// testLimit is the memory.max TestLimitBox asks for: not a whole MiB, so
// the kernel's rounding to pages is checked too.
const testLimit = 48<<20 + 100

// TestLimitBox: limitBox makes the box's cgroup below the root it is
// given with memory.max set to the limit (in whole pages), moves its
// process there, and returns that cgroup's memory.events, on a cgroup v2
// child of this host's hierarchy, in a child process.
func TestLimitBox(t *testing.T) {
	if root := os.Getenv(limitBoxEnv); root != "" {
		limitBoxChild(root)
		return
	}
	testhost.RequireRoot(t)
	root := v2TestCgroup(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestLimitBox$", "-test.count=1")
	cmd.Env = append(os.Environ(), limitBoxEnv+"="+root)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("limitBox in a child: %v\n%s", err, out)
	}
	// The cgroup path ends so: a test in a cgroup namespace sees it
	// relative to the namespace's root.
	want := fmt.Sprintf("pid %d in 0::/%s/%s memory.max %d", cmd.Process.Pid, filepath.Base(root), boxCgroup, testLimit&^(os.Getpagesize()-1))
	if !strings.Contains(string(out), want) {
		t.Errorf("child said %q, want %q", out, want)
	}
	b, err := os.ReadFile(filepath.Join(root, boxCgroup, "memory.max"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(b)), strconv.Itoa(testLimit&^(os.Getpagesize()-1)); got != want {
		t.Errorf("memory.max = %s, want %s", got, want)
	}
}

// limitBoxChild runs limitBox below root and prints what the test checks:
// its pid, its own cgroup as the kernel names it, and what memory.max
// holds; it exits 1 with the error on failure.
func limitBoxChild(root string) {
	events, err := limitBox(root, testLimit)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	defer events.Close()
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	b, err := os.ReadFile(filepath.Join(root, boxCgroup, "memory.max"))
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	var v2 string
	for _, l := range strings.Split(strings.TrimSpace(string(self)), "\n") {
		if p, ok := strings.CutPrefix(l, "0::"); ok {
			v2 = "/" + filepath.Join(filepath.Base(filepath.Dir(p)), filepath.Base(p))
		}
	}
	fmt.Printf("pid %d in 0::%s memory.max %s\n", os.Getpid(), v2, strings.TrimSpace(string(b)))
}

// v2TestCgroup makes an empty cgroup for the test at the top of this
// host's cgroup v2 hierarchy, with the memory controller, removed (with
// its box) at the end. It only uses a memory controller the host's root
// already hands to its children: enabling it there would change the whole
// host, and nothing could safely undo it while other cgroups use it.
func v2TestCgroup(t *testing.T) string {
	t.Helper()
	mnt := testhost.CgroupV2Memory(t, "TestConformanceSessionOOM/microvm")
	sub, err := os.ReadFile(filepath.Join(mnt, "cgroup.subtree_control"))
	if err != nil {
		testhost.SkipOrFail(t, "cannot read the cgroup v2 root's subtree_control: "+err.Error())
	}
	if !slices.Contains(strings.Fields(string(sub)), "memory") {
		testhost.SkipOrFail(t, "the cgroup v2 root "+mnt+" does not enable memory for its children; the test will not change the host's root: enable it with 'echo +memory > "+filepath.Join(mnt, "cgroup.subtree_control")+"'")
	}
	root := filepath.Join(mnt, fmt.Sprintf("warden-test-limitbox-%d", os.Getpid()))
	if err := os.Mkdir(root, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, d := range []string{filepath.Join(root, boxCgroup), root} {
			if err := os.Remove(d); err != nil && !os.IsNotExist(err) {
				t.Errorf("removing the test cgroup: %v", err)
			}
		}
	})
	return root
}
