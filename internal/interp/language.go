package interp

import (
	"fmt"
	"io"
	"strconv"
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
	// oneShot follow program in a one-shot run's Argv, which ends with
	// the code: the interpreter runs it once, with no driver.
	oneShot []string
	// env is added to the environment when the key is absent.
	env []string
	// send writes one request to the driver's control pipe.
	send func(w io.Writer, r request) error
}

// languages are every language this package has a driver for, in the
// order help texts, error messages and API enums list them. It is the one
// list of languages: front ends and the API schema's tests derive theirs
// from it.
var languages = []*language{pythonLanguage, bashLanguage, javascriptLanguage}

// lookup is the language called name.
func lookup(name string) (*language, bool) {
	for _, l := range languages {
		if l.name == name {
			return l, true
		}
	}
	return nil, false
}

// Languages returns the languages New accepts, in the order help texts and
// enums list them, so every front end offers the same ones. A language may
// still be unsupported on a host that lacks its interpreter; New says so.
func Languages() []string {
	names := make([]string, len(languages))
	for i, l := range languages {
		names[i] = l.name
	}
	return names
}

// Known says whether New accepts language, so front ends can refuse an
// unknown one before anything starts.
func Known(language string) bool {
	_, ok := lookup(language)
	return ok
}

// KnownOf keeps, in order, the languages of have that New accepts, never
// nil: what front ends list for a template, so an interpreter Available
// learns before a front end's schema does never breaks an answer.
func KnownOf(have []string) []string {
	out := []string{}
	for _, l := range have {
		if Known(l) {
			out = append(out, l)
		}
	}
	return out
}

// UnknownError is the one-line error for a language New does not accept,
// naming those it does. A client's name is quoted and cut at 64 bytes, so
// a huge one does not come back whole.
func UnknownError(language string) error {
	q := strconv.Quote(language)
	if len(language) > maxQuoted {
		q = strconv.Quote(language[:maxQuoted]) + "..."
	}
	return fmt.Errorf("%w %s: use %s", ErrUnknownLanguage, q, strings.Join(Languages(), ", "))
}

// maxQuoted is how much of an unknown language's name UnknownError quotes.
const maxQuoted = 64

// OneShotArgv is the command that runs code once in language's interpreter
// without a driver (a one-shot run keeps no state, so it needs none), and
// env with the language's defaults (python's MPLBACKEND=Agg,
// PYTHONIOENCODING=utf-8) for the keys env lacks, so code behaves as in a
// session's interpreter. It fails with UnknownError for a language New
// does not accept.
func OneShotArgv(language, code string, env []string) (argv, withDefaults []string, err error) {
	l, ok := lookup(language)
	if !ok {
		return nil, nil, UnknownError(language)
	}
	return append(append([]string{l.program}, l.oneShot...), code), addMissing(env, l.env), nil
}

// environ returns env with the language's additions and a PATH.
func (l *language) environ(env []string) []string {
	return addMissing(env, append([]string{defaultPath}, l.env...))
}

// addMissing returns a copy of env with each of defaults whose key env
// does not set.
func addMissing(env, defaults []string) []string {
	out := append([]string(nil), env...)
	for _, kv := range defaults {
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
