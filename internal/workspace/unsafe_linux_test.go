package workspace

import (
	"strings"
	"unsafe"
)

func unsafePointer(b []byte) unsafe.Pointer { return unsafe.Pointer(&b[0]) }

func trimNUL(s string) string { return strings.TrimRight(s, "\x00") }
