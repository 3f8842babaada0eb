package main

import (
	"os"
	"path/filepath"
)

// defaultStateDir is /var/lib/warden for root, and the XDG state
// directory for anyone else.
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/warden"
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "warden")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "warden")
	}
	return "none"
}
