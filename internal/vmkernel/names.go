package vmkernel

import "strings"

// isHexKey says s is a key or inputs hash as build.sh writes them: 64
// lower-case hex digits. Hand-written, not a regexp: this package is
// linked into every `warden run` (through doctor), and compiling
// regexps at init cost 100 KB of allocation there (TestSlimInitIsLight).
func isHexKey(s string) bool {
	if len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// isSourceVersion says s is a Debian package version as the manifest and
// the changelog may hold it: 1 to 64 of A-Z a-z 0-9 . + ~ : -.
func isSourceVersion(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, c := range s {
		ok := c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune(".+~:-", c)
		if !ok {
			return false
		}
	}
	return true
}
