package initramfs

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// FuzzCpioAccepts writes entries named by the fuzzer: whatever the writer
// accepts, cpio must list back with the same names.
func FuzzCpioAccepts(f *testing.F) {
	cpio := testhost.RequireTool(f, "cpio")
	f.Add("a\nb\nb/c", []byte("data"))
	f.Add("x\n../y\n", []byte{})
	f.Fuzz(func(t *testing.T, names string, data []byte) {
		var buf bytes.Buffer
		w := NewWriter(&buf)
		var want []string
		for i, n := range strings.SplitN(names, "\n", 8) {
			var err error
			if i%2 == 0 {
				err = w.Dir(n, 0o755)
			} else {
				err = w.File(n, 0o644, data)
			}
			if err == nil {
				want = append(want, n)
			}
		}
		if err := w.Close(); err != nil {
			return // a refused entry: nothing to check
		}
		cmd := exec.Command(cpio, "-it", "--quiet")
		cmd.Stdin = &buf
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("cpio rejected the archive of %q: %v", want, err)
		}
		if got := strings.Join(want, "\n") + "\n"; len(want) > 0 && string(out) != got {
			t.Errorf("cpio listed %q, want %q", out, got)
		}
	})
}
