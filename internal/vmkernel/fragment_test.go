package vmkernel

import (
	"regexp"
	"strings"
	"testing"
)

// TestFragmentLines: every line of config.fragment is a comment, blank,
// an option set, or an option unset, and no option is given twice, so a
// typo fails here rather than after a build's minutes (build.sh checks
// only the lines it recognises).
func TestFragmentLines(t *testing.T) {
	set := regexp.MustCompile(`^(CONFIG_[A-Z0-9_]+)=(y|-?[0-9]+)$`)
	unset := regexp.MustCompile(`^# (CONFIG_[A-Z0-9_]+) is not set$`)
	seen := map[string]int{}
	for i, line := range strings.Split(strings.TrimSuffix(string(fragment), "\n"), "\n") {
		var name string
		switch {
		case set.MatchString(line):
			name = set.FindStringSubmatch(line)[1]
		case unset.MatchString(line):
			name = unset.FindStringSubmatch(line)[1]
		case line == "" || strings.HasPrefix(line, "#") && !strings.HasPrefix(line, "# CONFIG_"):
			continue
		default:
			t.Errorf("config.fragment:%d: got %q, want CONFIG_X=value, \"# CONFIG_X is not set\" or a comment", i+1, line)
			continue
		}
		if prev, dup := seen[name]; dup {
			t.Errorf("config.fragment:%d: %s again (first on line %d)", i+1, name, prev)
		}
		seen[name] = i + 1
	}
	for _, want := range []string{
		"CONFIG_PVH", "CONFIG_VIRTIO_CONSOLE", "CONFIG_SECCOMP_FILTER", "CONFIG_MODULES", "CONFIG_BPF_SYSCALL", "CONFIG_IO_URING",
		"CONFIG_RANDOMIZE_KSTACK_OFFSET_DEFAULT", "CONFIG_CPU_MITIGATIONS", "CONFIG_X86_UMIP", "CONFIG_SECURITY_DMESG_RESTRICT",
		"CONFIG_SECURITY_PERF_EVENTS_RESTRICT", "CONFIG_SLAB_MERGE_DEFAULT", "CONFIG_NET_9P_FD",
		// -O2: tinyconfig's -Os poisons the freed init text a byte a store (docs/performance.md).
		"CONFIG_CC_OPTIMIZE_FOR_PERFORMANCE", "CONFIG_CC_OPTIMIZE_FOR_SIZE",
	} {
		if seen[want] == 0 {
			t.Errorf("config.fragment: got no %s, want it decided", want)
		}
	}
}
