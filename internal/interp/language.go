package interp

import (
	"io"
	"strings"
)

// defaultPath is the sandbox's PATH, used when the environment has none,
// so the interpreter's name can be looked up.
const defaultPath = "PATH=/usr/local/bin:/usr/bin:/bin"

// language is how to start and talk to one kind of interpreter.
type language struct {
	name string
	// program is Argv[0], looked up on the sandbox's PATH.
	program string
	// hostPaths are where a root may have program: the host's (whose
	// /usr a sandbox on no template sees) or a template's (availableIn).
	hostPaths []string
	// args follow program in Argv; they carry the driver's source.
	args []string
	// env is added to the environment when the key is absent.
	env []string
	// send writes one request to the driver's control pipe.
	send func(w io.Writer, r request) error
}

// environ returns env with the language's additions and a PATH.
func (l *language) environ(env []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range append([]string{defaultPath}, l.env...) {
		key, _, _ := strings.Cut(kv, "=")
		if !hasKey(out, key) {
			out = append(out, kv)
		}
	}
	return out
}

func hasKey(env []string, key string) bool {
	for _, kv := range env {
		if k, _, _ := strings.Cut(kv, "="); k == key {
			return true
		}
	}
	return false
}
