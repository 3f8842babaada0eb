package vmkernel

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// sourceChangelog is the installed linux-source-6.1's changelog: its
// first line names the package version, and reading it (a bounded
// gunzip of a few hundred bytes) is cheaper than dpkg's status file.
const sourceChangelog = "/usr/share/doc/linux-source-6.1/changelog.Debian.gz"

// maxChangelogLine bounds the first line read from the changelog.
const maxChangelogLine = 256

// CheckSource says whether k was built from the linux-source-6.1 now
// installed: after a security update of the package, Find keeps
// returning the kernel of the old source until `make microvm-kernel`
// builds the new one. The error is one line for warden doctor to show as
// a warning: the old kernel still boots.
func CheckSource(k Kernel) error {
	installed, err := installedSource(sourceChangelog)
	if err != nil {
		return err
	}
	if installed != k.Source {
		return fmt.Errorf("the microVM kernel was built from linux-source %s, installed is %s: run `make microvm-kernel`", k.Source, installed)
	}
	return nil
}

// installedSource reads the package version from the first line of the
// gzipped Debian changelog p.
func installedSource(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", fmt.Errorf("reading the installed linux-source version: %w", err)
	}
	defer closeLogged(f)
	z, err := gzip.NewReader(f)
	if err != nil {
		return "", fmt.Errorf("reading the installed linux-source version from %q: %w", p, err)
	}
	line, err := bufio.NewReader(io.LimitReader(z, maxChangelogLine)).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("reading the installed linux-source version from %q: no first line within %d bytes: %w", p, maxChangelogLine, err)
	}
	rest, ok := strings.CutPrefix(line, "linux (")
	version, _, closed := strings.Cut(rest, ") ")
	if !ok || !closed || !isSourceVersion(version) {
		return "", fmt.Errorf("reading the installed linux-source version from %q: first line %q is not \"linux (VERSION) ...\"", p, line)
	}
	return version, nil
}

// closeLogged closes f, which was only read: a failure is logged.
func closeLogged(f *os.File) {
	if err := f.Close(); err != nil {
		slog.Warn("vmkernel: closing "+f.Name(), "err", err)
	}
}
