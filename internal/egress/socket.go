package egress

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
)

// socketName is the socket's name inside its attachment's directory.
const socketName = "proxy.sock"

// maxSocketPath is the longest path a unix socket may be bound at
// (sun_path is 108 bytes with the terminating NUL).
const maxSocketPath = 107

// prepareDir creates the proxy's socket directory, or takes an existing
// one, and makes it root's alone (0700): the sockets inside are reached
// through bind mounts into sandboxes, never through this path.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("egress: socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("egress: socket directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("egress: socket directory %s is not a directory", dir)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("egress: socket directory: %w", err)
	}
	return nil
}

// listenSocket makes a private directory for one sandbox under dir
// (0711: others may pass through to the socket but not list it) and a
// socket in it that anyone may connect to (0666), since the sandbox's
// bridge runs as an unprivileged user of another user namespace. It
// returns the directory, to be removed with the socket.
func listenSocket(dir, sandbox string) (*net.UnixListener, string, error) {
	priv, err := os.MkdirTemp(dir, sandbox+"-")
	if err != nil {
		return nil, "", fmt.Errorf("egress: socket directory: %w", err)
	}
	ln, err := bindSocket(priv)
	if err != nil {
		return nil, "", errors.Join(err, os.RemoveAll(priv))
	}
	return ln, priv, nil
}

func bindSocket(priv string) (*net.UnixListener, error) {
	if err := os.Chmod(priv, 0o711); err != nil {
		return nil, fmt.Errorf("egress: socket directory: %w", err)
	}
	path := filepath.Join(priv, socketName)
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("egress: socket path %s is longer than %d bytes: use a shorter Config.Dir", path, maxSocketPath)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("egress: listen: %w", err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		return nil, errors.Join(fmt.Errorf("egress: socket mode: %w", err), ln.Close())
	}
	return ln, nil
}
