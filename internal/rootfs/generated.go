package rootfs

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// WriteGeneratedEtc writes GeneratedEtc(hostname) into dir, which must
// not exist yet, each file read-only to everyone, for a runtime that
// binds them over a template's own /etc files (gVisor, Docker): the
// image's /etc stays as the image has it, but the users, groups, host
// names and resolver are Warden's, as in every sandbox. It returns the
// files' names, sorted, so the runtime's mounts come in a stable order.
func WriteGeneratedEtc(dir, hostname string) ([]string, error) {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("making the generated /etc: %w", err)
	}
	var names []string
	for name, content := range GeneratedEtc(hostname) {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			return nil, fmt.Errorf("writing the generated /etc/%s: %w", name, err)
		}
		// WriteFile's mode is masked by the umask; the bind shows this one.
		if err := os.Chmod(p, 0o444); err != nil {
			return nil, fmt.Errorf("writing the generated /etc/%s: %w", name, err)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}
