package gvisor

import (
	"bytes"
	"regexp"
	"strings"
)

// DefaultRunsc is where make runsc installs, root-owned, the runsc that
// tools/gvisor/go.mod pins: warden runs it when --runsc is not given and
// it is there, and else runsc on PATH (Debian's, 2022-12-19, which lacks
// lazy restore, OOM handling and four years of gVisor's fixes). A path of
// warden's own, rather than one on PATH, so that installing it changes no
// other program's runsc.
const DefaultRunsc = "/usr/local/lib/warden/runsc"

// PinnedRunscDate is the date (YYYYMMDD) of the gVisor commit
// tools/gvisor/go.mod pins (a test keeps the two equal): warden doctor
// warns of a runsc older than it.
const PinnedRunscDate = "20260905"

// RunscVersion is what `runsc --version` says of a runsc binary.
type RunscVersion struct {
	// Version is the version it names: a Go pseudo-version for make
	// runsc's ("v0.0.0-20260905035102-160fafc42237"), Debian's
	// "0.0~20221219.0", gVisor's "release-20240101.0", or
	// "VERSION_MISSING" for a build without one stamped.
	Version string
	// Date is the first YYYYMMDD in Version, "" where it has none.
	Date string
}

// maxVersionLine bounds the version we keep from runsc's output.
const maxVersionLine = 200

// versionDate finds a date of this century in a version string.
var versionDate = regexp.MustCompile(`20[0-9]{2}(0[1-9]|1[0-2])(0[1-9]|[12][0-9]|3[01])`)

// ParseRunscVersion reads the output of `runsc --version`, whose first
// line is "runsc version VERSION"; ok is false for any other output.
func ParseRunscVersion(out []byte) (v RunscVersion, ok bool) {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	rest, found := strings.CutPrefix(string(line), "runsc version ")
	rest = strings.TrimSpace(rest)
	if !found || rest == "" || len(rest) > maxVersionLine || strings.ContainsFunc(rest, notPrintable) {
		return RunscVersion{}, false
	}
	return RunscVersion{Version: rest, Date: versionDate.FindString(rest)}, true
}

// notPrintable says r has no place in a version string.
func notPrintable(r rune) bool { return r < 0x21 || r > 0x7e }

// OlderThanPin says v is older than the pinned runsc, or of no known date.
func (v RunscVersion) OlderThanPin() bool {
	return v.Date == "" || v.Date < PinnedRunscDate
}

// firstLine is the first line of out, cut to maxVersionLine bytes, for
// an error message.
func firstLine(out []byte) string {
	line, _, _ := bytes.Cut(out, []byte("\n"))
	return string(line[:min(len(line), maxVersionLine)])
}

// versionOutput keeps the first maxVersionOutput bytes written to it and
// drops the rest, so a runsc that writes without end costs no memory.
type versionOutput struct{ bytes.Buffer }

// maxVersionOutput bounds what is kept of `runsc --version`'s output.
const maxVersionOutput = 4096

func (w *versionOutput) Write(p []byte) (int, error) {
	if room := maxVersionOutput - w.Len(); room > 0 {
		w.Buffer.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
