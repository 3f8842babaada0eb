package e2e

import (
	"slices"
	"strings"
	"testing"
)

// runExecutor, when set, is the --executor every `warden run` of the
// harness takes (wardenAs, and the lifecycle tests that start warden
// themselves, through withExecutor), so that suites written for the
// default executor (auto: warden-exec where it can build the spec) run
// again on the Go init. e2e tests never run in parallel, so one variable
// serves; underExecutor sets it for one test and restores it.
var runExecutor string

// withExecutor is a warden command line with --executor runExecutor
// after "run", unless it is unset or the command line already chooses
// an executor or a backend (--executor is for the native backend only).
// Only the flags before "--" are looked at: the program's are its own.
func withExecutor(args []string) []string {
	if runExecutor == "" || len(args) == 0 || args[0] != "run" {
		return args
	}
	flags := args
	if i := slices.Index(args, "--"); i >= 0 {
		flags = args[:i]
	}
	if slices.ContainsFunc(flags, func(a string) bool {
		return a == "--executor" || a == "--backend" || strings.HasPrefix(a, "--executor=") || strings.HasPrefix(a, "--backend=")
	}) {
		return args
	}
	return append([]string{"run", "--executor", runExecutor}, args[1:]...)
}

// pid1Names is PID 1's /proc/1/cmdline under each executor.
var pid1Names = map[string]string{"go": "warden-init\x00", "fast": "warden-exec\x00"}

// underExecutor runs each test with every warden run under --executor e.
func underExecutor(t *testing.T, e string, tests []suiteTest) {
	t.Helper()
	requireSandbox(t)
	prev := runExecutor
	runExecutor = e
	t.Cleanup(func() { runExecutor = prev })
	// The harness must reach warden with the flag: PID 1 names it.
	if r := runJSON(t, "--", "cat", "/proc/1/cmdline"); r.Stdout != pid1Names[e] {
		t.Fatalf("--executor %s through the harness: /proc/1/cmdline got %q, want %q (stderr %q)", e, r.Stdout, pid1Names[e], r.Stderr)
	}
	for _, tt := range tests {
		t.Run(tt.name, tt.run)
	}
}

// suiteTest is one top-level test of a suite, run again as a subtest.
type suiteTest struct {
	name string
	run  func(*testing.T)
}

// escapeSuite is every test of escape_test.go. The default run of the
// suite takes auto, which is warden-exec for the specs it can build;
// the Go init still builds the rest (templates, --net proxy, a
// workspace without an idmapped mount, sessions), so the whole suite
// runs again on it (TestEscapeUnderGoInit).
var escapeSuite = []suiteTest{
	{"TestEscapeHostSecrets", TestEscapeHostSecrets},
	{"TestEscapeHostEnvironment", TestEscapeHostEnvironment},
	{"TestEscapeHostProcesses", TestEscapeHostProcesses},
	{"TestEscapeReadOnlyRoot", TestEscapeReadOnlyRoot},
	{"TestEscapePrivilegeGain", TestEscapePrivilegeGain},
	{"TestEscapeSetIDInWorkspace", TestEscapeSetIDInWorkspace},
	{"TestEscapeKernelInterfaces", TestEscapeKernelInterfaces},
	{"TestEscapeDescriptorsAndTerminal", TestEscapeDescriptorsAndTerminal},
	{"TestEscapeThroughInit", TestEscapeThroughInit},
	{"TestEscapeWorkspaceSymlinks", TestEscapeWorkspaceSymlinks},
	{"TestEscapeDeviceTimes", TestEscapeDeviceTimes},
}

// lifecycleSuite is every test of lifecycle_test.go, for the same
// reason (TestLifecycleUnderGoInit).
var lifecycleSuite = []suiteTest{
	{"TestLifecycleNothingOutlivesRun", TestLifecycleNothingOutlivesRun},
	{"TestLifecycleWardenKilled", TestLifecycleWardenKilled},
	{"TestLifecycleLeavesNoHostTraces", TestLifecycleLeavesNoHostTraces},
}

// TestEscapeUnderGoInit runs the escape suite with --executor go.
func TestEscapeUnderGoInit(t *testing.T) { underExecutor(t, "go", escapeSuite) }

// TestLifecycleUnderGoInit runs the lifecycle suite with --executor go.
func TestLifecycleUnderGoInit(t *testing.T) { underExecutor(t, "go", lifecycleSuite) }
