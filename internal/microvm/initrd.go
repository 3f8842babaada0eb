package microvm

import (
	"bytes"
	"io"
	"os"

	"github.com/warden-sandbox/warden/internal/initramfs"
)

// Initramfs builds the guest's initramfs around init, an open static
// warden-init: /init, the mount points it uses, /dev/console, which the
// kernel opens for init's stdio before devtmpfs exists, and /dev/null.
// The console is virtio-serial's hvc0, which its driver may register only
// after init starts (the port is announced over its control queue): the
// kernel then starts init with fds 0-2 closed, and Go's runtime, which
// opens /dev/null for them, threw and exited 2 without it (about one
// boot in 12 once the PIT let the guest's timers run).
func Initramfs(init *os.File) ([]byte, error) {
	var buf bytes.Buffer
	if err := WriteInitramfs(&buf, init); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// InitramfsLayout is the version of the archive's layout WriteInitramfs
// writes (the entries beside /init): a change to them must bump it, as it
// names the initramfs files kept on disk (vmbox), which a new layout must
// not reuse.
const InitramfsLayout = 1

// WriteInitramfs writes Initramfs's archive to out, straight from init
// (read from where its offset stands), with no copy of it in memory:
// for an initramfs kept as a file (Config.InitrdFile).
func WriteInitramfs(out io.Writer, init *os.File) error {
	w := initramfs.NewWriter(out)
	for _, err := range []error{
		w.Dir("dev", 0o755),
		w.CharDev("dev/console", 0o600, 5, 1),
		w.CharDev("dev/null", 0o666, 1, 3),
		w.Dir("proc", 0o555),
		w.Dir("sys", 0o555),
		w.FileFrom("init", 0o755, init),
		w.Close(),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}
