package spec

import "unicode/utf8"

// CompleteUTF8 is the length of buf without a trailing, incomplete UTF-8
// sequence (at most 3 bytes), so a character split across two chunks of
// output is sent whole. Bytes that can never be valid UTF-8 are left in
// place; JSON encoding replaces them with U+FFFD. Warden's exec stream and
// the E2B interpreter's both cut output here, so they cut alike.
func CompleteUTF8(buf []byte) int {
	for i := len(buf) - 1; i >= 0 && i >= len(buf)-utf8.UTFMax; i-- {
		if !utf8.RuneStart(buf[i]) {
			continue
		}
		if !utf8.FullRune(buf[i:]) {
			return i
		}
		break
	}
	return len(buf)
}
