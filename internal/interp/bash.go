package interp

import (
	_ "embed"
	"io"
	"strings"
)

// bashDriver is the loop a persistent bash runs; it is passed as the -c
// argument so it needs no file in the sandbox.
//
//go:embed driver/bash_driver.sh
var bashDriver string

// bashLanguage is a persistent non-interactive bash without startup files,
// so only what the code itself sets (cwd, variables, functions) persists.
var bashLanguage = &language{
	name:      "bash",
	program:   "bash",
	hostPaths: []string{"/usr/bin/bash", "/bin/bash"},
	args:      []string{"--noprofile", "--norc", "-c", bashDriver, "bash"},
	oneShot:   []string{"-c"},
	send:      writeBashRequest,
}

// writeBashRequest sends the token line, the code's lines and the token
// line again. The token is random per run, so no line of the code can end
// the request early; NUL bytes, which bash cannot hold in a variable, are
// dropped.
func writeBashRequest(w io.Writer, r request) error {
	var b strings.Builder
	code := strings.ReplaceAll(r.Code, "\x00", "")
	b.Grow(len(code) + 2*len(r.Token) + 3)
	b.WriteString(r.Token + "\n")
	b.WriteString(code)
	if !strings.HasSuffix(code, "\n") {
		b.WriteByte('\n')
	}
	b.WriteString(r.Token + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}
