package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// TestExecutorPlanBounds: a spec whose plan warden-exec would not take
// (argv past op Exec's strings, a plan over its MiB) runs under auto on
// the Go init, exit 0, as under go; --executor fast refuses it before
// the clone in one line naming the plan, never exit 125 from a started
// sandbox.
func TestExecutorPlanBounds(t *testing.T) {
	requireSandbox(t)
	var nums []string
	for i := 1; i <= 1100; i++ {
		nums = append(nums, strconv.Itoa(i))
	}
	var envFlags []string
	for i := range 10 {
		envFlags = append(envFlags, "--env", fmt.Sprintf("V%d=%s", i, strings.Repeat("v", 120000)))
	}
	tests := []struct {
		name  string
		flags []string
		cmd   []string
		want  string
	}{
		{"argv of 1100", nil, append([]string{"/bin/echo"}, nums...), strings.Join(nums, " ") + "\n"},
		{"env over a MiB", envFlags, []string{"sh", "-c", `printf %s "$V9" | wc -c`}, "120000\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, executor := range []string{"auto", "go"} {
				args := append(append([]string{"run", "--executor", executor}, tt.flags...), "--")
				inv := warden(t, "", append(args, tt.cmd...)...)
				if inv.code != 0 || strings.TrimSpace(inv.stdout) != strings.TrimSpace(tt.want) {
					t.Errorf("--executor %s: got exit %d, stdout %.80q, stderr %q; want exit 0, stdout %.80q", executor, inv.code, inv.stdout, inv.stderr, tt.want)
				}
			}
			args := append(append([]string{"run", "--executor", "fast"}, tt.flags...), "--")
			inv := warden(t, "", append(args, tt.cmd...)...)
			msg := strings.TrimSuffix(inv.stderr, "\n")
			switch {
			case inv.code == 125 && !strings.Contains(msg, "\n") && strings.Contains(msg, "too large for warden-exec's plan"):
			case fastUnavailable(inv):
				t.Logf("--executor fast is unavailable here: %s", msg)
			default:
				t.Errorf("--executor fast: got exit %d, stderr %q; want exit 125 and one line naming the plan as too large", inv.code, inv.stderr)
			}
		})
	}
}
