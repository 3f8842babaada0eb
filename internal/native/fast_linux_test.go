package native

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestFastHierarchy: auto takes the Go init and fast is refused in one
// line on a cgroup v2 host, which the differential test has not covered;
// v1 and no hierarchy at all (rootless without cgroups) leave the choice
// to the spec.
func TestFastHierarchy(t *testing.T) {
	tests := []struct {
		version  string
		wantAuto Executor
		wantErr  string
	}{
		{"v1", ExecutorFast, ""},
		{"", ExecutorFast, ""},
		{"v2", ExecutorGo, "--executor fast: cgroup v2 hosts are not yet covered by the differential test (auto uses the Go init there); use --executor auto"},
	}
	for _, tt := range tests {
		whyNot := fastHierarchy(tt.version)
		if got, _ := ExecutorAuto.pick(whyNot); got != tt.wantAuto {
			t.Errorf("%q: auto picks %q, want %q", tt.version, got, tt.wantAuto)
		}
		_, err := ExecutorFast.pick(whyNot)
		if got := errString(err); got != tt.wantErr || strings.Contains(got, "\n") {
			t.Errorf("%q: fast: got %q, want %q", tt.version, got, tt.wantErr)
		}
	}
}

// errString is err's message, "" for nil.
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// TestBoxCanRead: the memory usage file goes in the plan only where the
// box's root can open it, as the Go init's best-effort open would.
func TestBoxCanRead(t *testing.T) {
	tests := []struct {
		name     string
		mode     os.FileMode
		rootless bool
		want     bool
	}{
		{"others may read, rootful", 0o444, false, true},
		{"owner only, rootful", 0o400, false, false},
		{"owner only, rootless owner", 0o400, true, true},
	}
	for _, tt := range tests {
		p := filepath.Join(t.TempDir(), "memory.usage_in_bytes")
		if err := os.WriteFile(p, []byte("1\n"), tt.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, tt.mode); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if got := boxCanRead(fi, tt.rootless, os.Geteuid()); got != tt.want {
			t.Errorf("%s: boxCanRead %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestStartRetriesWithoutExecutor: under auto, a start that finds no
// warden-exec (nsinit.ErrNoExecutor: removed since the check) is made
// once more with the Go init; under fast, or for another failure, the
// error stands and nothing is retried.
func TestStartRetriesWithoutExecutor(t *testing.T) {
	gone := fmt.Errorf("starting sandbox init: %w", nsinit.ErrNoExecutor)
	tests := []struct {
		name      string
		executor  Executor
		err       error
		wantCalls int
		wantFast  bool
		wantErr   bool
	}{
		{"auto, vanished", ExecutorAuto, gone, 2, false, false},
		{"default, vanished", "", gone, 2, false, false},
		{"fast, vanished", ExecutorFast, gone, 1, true, true},
		{"auto, other failure", ExecutorAuto, errors.New("starting sandbox init: EPERM"), 1, true, true},
	}
	saved := launch
	t.Cleanup(func() { launch = saved })
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := &box{spec: &spec.Spec{}, ids: &idMapping{}, rt: Runtime{Executor: tt.executor}, fast: &fastRun{}}
			calls := 0
			launch = func(b *box) (*initProc, error) {
				calls++
				if b.fast != nil {
					return nil, tt.err
				}
				return &initProc{}, nil
			}
			cfg := nsinit.Config{Rlimits: nsinit.Rlimits{Processes: 12345}}
			_, err := b.start(&cfg)
			if calls != tt.wantCalls || (b.fast != nil) != tt.wantFast || (err != nil) != tt.wantErr {
				t.Errorf("got %d starts, fast %v, error %v; want %d, %v, error %v", calls, b.fast != nil, err, tt.wantCalls, tt.wantFast, tt.wantErr)
			}
			if !tt.wantFast && cfg.Rlimits.Processes == 12345 {
				t.Errorf("the Go init's retry kept warden-exec's config (RLIMIT_NPROC %d)", cfg.Rlimits.Processes)
			}
		})
	}
}

// TestListenerStdinTakesGoInit: a run with a listener as stdin gets the
// Go init, which drops its own copy of fd 0, under auto, and a one-line
// refusal naming the listener under fast (warden-exec's PID 1 would
// keep the listener for the box's life).
func TestListenerStdinTakesGoInit(t *testing.T) {
	for _, tt := range []struct {
		executor Executor
		wantErr  string
	}{
		{ExecutorAuto, ""},
		{"", ""},
		{ExecutorGo, ""},
		{ExecutorFast, "--executor fast: a listener as stdin (--stdin-listener"},
	} {
		b := &box{spec: &spec.Spec{}, ids: &idMapping{}, rt: Runtime{Executor: tt.executor, ListenerStdin: os.Stdin}}
		err := b.chooseExecutor(&nsinit.Config{})
		if b.fast != nil || (err == nil) != (tt.wantErr == "") || (err != nil && (!strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("executor %q with a listener: fast %v, error %v; want the Go init, error containing %q", tt.executor, b.fast != nil, err, tt.wantErr)
		}
	}
}
