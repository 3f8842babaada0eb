package microvm

import (
	"bytes"
	"os"

	"github.com/warden-sandbox/warden/internal/initramfs"
)

// Initramfs builds the guest's initramfs around init, an open static
// warden-init: /init, the mount points it uses, and /dev/console, which
// the kernel opens for init's stdio before devtmpfs exists.
func Initramfs(init *os.File) ([]byte, error) {
	var buf bytes.Buffer
	w := initramfs.NewWriter(&buf)
	for _, err := range []error{
		w.Dir("dev", 0o755),
		w.CharDev("dev/console", 0o600, 5, 1),
		w.Dir("proc", 0o555),
		w.Dir("sys", 0o555),
		w.FileFrom("init", 0o755, init),
		w.Close(),
	} {
		if err != nil {
			return nil, err
		}
	}
	return buf.Bytes(), nil
}
