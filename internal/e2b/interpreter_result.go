package e2b

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/warden-sandbox/warden/internal/spec"
)

// The lines of an execution besides stdout and stderr, as E2B's server
// writes them (its pydantic models dumped without their None fields).

// execCountLine says which execution of its context this is (Jupyter's
// execution_count); it comes first.
type execCountLine struct {
	Type  string `json:"type"` // "number_of_executions"
	Count int    `json:"execution_count"`
}

// execResultLine is one result: the value of the code's last expression
// (is_main_result) or one thing it displayed (a chart, a table). Each
// field holds one MIME type's data; images and PDFs are base64.
type execResultLine struct {
	Type         string            `json:"type"` // "result"
	Text         string            `json:"text,omitempty"`
	HTML         string            `json:"html,omitempty"`
	Markdown     string            `json:"markdown,omitempty"`
	SVG          string            `json:"svg,omitempty"`
	PNG          string            `json:"png,omitempty"`
	JPEG         string            `json:"jpeg,omitempty"`
	PDF          string            `json:"pdf,omitempty"`
	Latex        string            `json:"latex,omitempty"`
	JSON         json.RawMessage   `json:"json,omitempty"`
	JavaScript   string            `json:"javascript,omitempty"`
	Extra        map[string]string `json:"extra,omitempty"`
	IsMainResult bool              `json:"is_main_result"`
}

// execErrorLine is the exception the code raised, or why it ended
// without finishing.
type execErrorLine struct {
	Type      string `json:"type"` // "error"
	Name      string `json:"name"`
	Value     string `json:"value"`
	Traceback string `json:"traceback"`
}

func execError(name, value, traceback string) execErrorLine {
	return execErrorLine{Type: "error", Name: name, Value: value, Traceback: traceback}
}

// execResultLines are the lines that close an execution in a language: a
// note on output cut at the sandbox's limit, the displayed outputs in
// the order the code made them, the main result, and the error.
func execResultLines(language string, r spec.Result) []any {
	var lines []any
	if r.StdoutTruncated || r.StderrTruncated {
		lines = append(lines, execLogLine{"stderr", "warden: output past the sandbox's output limit was dropped\n"})
	}
	for _, o := range r.Outputs {
		lines = append(lines, execOutputLine(o))
	}
	if r.Value != "" {
		lines = append(lines, execResultLine{Type: "result", Text: unquoteRepr(r.Value), IsMainResult: true})
	}
	if e, ok := execResultError(language, r); ok {
		lines = append(lines, e)
	}
	return lines
}

// execResultError is the error line of r, if it has one: the exception; a
// timeout or a death of the interpreter, which lost its state; a bash
// command's failing status, as E2B's bash kernel reports it (no name, the
// status as the value).
func execResultError(language string, r spec.Result) (execErrorLine, bool) {
	switch {
	case r.Exception != nil:
		return execError(r.Exception.Type, r.Exception.Message, r.Exception.Traceback), true
	case r.TimedOut:
		return execError("TimeoutError", "the execution ran past the sandbox's exec timeout and was killed; the context's interpreter restarts, its state is lost", ""), true
	case r.InterpreterRestarted:
		return execError("InterpreterDied", "the interpreter "+howDied(r)+" and restarts; the context's state is lost", ""), true
	case language == "bash" && r.ExitCode != 0:
		return execError("", strconv.Itoa(r.ExitCode), ""), true
	}
	return execErrorLine{}, false
}

// howDied says how an interpreter ended, as far as r tells.
func howDied(r spec.Result) string {
	switch {
	case r.OOMKilled:
		return "ran out of memory (the sandbox's memory limit) and was killed"
	case r.Signal != "":
		return "was killed by " + r.Signal
	}
	return fmt.Sprintf("exited with status %d", r.ExitCode)
}

// execOutputLine is one displayed output as a result line.
func execOutputLine(o spec.Output) execResultLine {
	l := execResultLine{Type: "result"}
	data := o.Data
	switch o.MimeType {
	case "image/png", "image/jpeg", "application/pdf":
		if o.Encoding != "base64" {
			data = base64.StdEncoding.EncodeToString([]byte(data))
		}
	default:
		if o.Encoding == "base64" {
			if b, err := base64.StdEncoding.DecodeString(data); err == nil {
				data = string(b)
			}
		}
	}
	switch o.MimeType {
	case "text/plain":
		l.Text = unquoteRepr(data)
	case "text/html":
		l.HTML = data
	case "text/markdown":
		l.Markdown = data
	case "image/svg+xml":
		l.SVG = data
	case "image/png":
		l.PNG = data
	case "image/jpeg":
		l.JPEG = data
	case "application/pdf":
		l.PDF = data
	case "text/latex":
		l.Latex = data
	case "application/javascript":
		l.JavaScript = data
	case "application/json":
		if json.Valid([]byte(data)) {
			l.JSON = json.RawMessage(data)
			break
		}
		l.Extra = map[string]string{o.MimeType: data}
	default:
		l.Extra = map[string]string{o.MimeType: data}
	}
	return l
}

// unquoteRepr drops the quotes around a string's repr, as E2B's server does
// for the text of every result ('hi' is shown as hi): exactly its rule,
// text that starts and ends with the same quote, single or double, loses
// its first and last character, so a lone quote becomes empty text.
func unquoteRepr(s string) string {
	if len(s) >= 1 && (s[0] == '\'' && s[len(s)-1] == '\'' || s[0] == '"' && s[len(s)-1] == '"') {
		return s[1:max(len(s)-1, 1)]
	}
	return s
}

// Code the code interpreter runs in a context for itself, before or after
// the client's code, in that context's language. Strings are JSON string
// literals, which Python and JavaScript read as the same string, or
// single-quoted for bash.

// contextCode is the code a context runs for itself in one language.
type contextCode struct {
	// chdir moves the interpreter to dir.
	chdir func(dir string) string
	// setEnv sets env in the interpreter's environment, which what the
	// code starts inherits.
	setEnv func(env map[string]string) string
	// resetEnv sets back's values and unsets the keys in unset.
	resetEnv func(back map[string]string, unset []string) string
}

// contextCodes is each interpreter language's contextCode; a test checks
// that every language of interp.Languages has a row.
var contextCodes = map[string]contextCode{
	"python": {
		chdir:  func(dir string) string { return "__import__('os').chdir(" + codeString(dir) + ")" },
		setEnv: func(env map[string]string) string { return "__import__('os').environ.update(" + codeObject(env) + ")" },
		resetEnv: func(back map[string]string, unset []string) string {
			return "(lambda e: (e.update(" + codeObject(back) + "), [e.pop(k, None) for k in " + codeList(unset) + "]))(__import__('os').environ) and None"
		},
	},
	"javascript": {
		chdir: func(dir string) string { return "process.chdir(" + codeString(dir) + "); void 0" },
		setEnv: func(env map[string]string) string {
			return "Object.assign(process.env, " + codeObject(env) + "); void 0"
		},
		resetEnv: func(back map[string]string, unset []string) string {
			return "Object.assign(process.env, " + codeObject(back) + "); for (const k of " + codeList(unset) + ") delete process.env[k]; void 0"
		},
	},
	"bash": {
		chdir:  func(dir string) string { return "cd -- " + codeBashQuote(dir) },
		setEnv: bashSetEnv,
		resetEnv: func(back map[string]string, unset []string) string {
			code := bashSetEnv(back)
			for _, k := range unset {
				code += "unset " + k + "\n"
			}
			return code
		},
	},
}

// bashSetEnv exports env, one variable a line.
func bashSetEnv(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		b.WriteString("export " + k + "=" + codeBashQuote(env[k]) + "\n")
	}
	return b.String()
}

// codeFor is language's contextCode, or an error for a language without
// one rather than another language's code.
func codeFor(language string) (contextCode, error) {
	c, ok := contextCodes[language]
	if !ok {
		return contextCode{}, fmt.Errorf("no context code for language %q", language)
	}
	return c, nil
}

// resetEnvCode undoes setEnv for keys once the code ran, as E2B's server
// does: a key the sandbox was created with gets that value back, any
// other is unset.
func resetEnvCode(c contextCode, keys []string, global map[string]string) string {
	back := map[string]string{}
	var unset []string
	for _, k := range keys {
		if v, ok := global[k]; ok {
			back[k] = v
		} else {
			unset = append(unset, k)
		}
	}
	return c.resetEnv(back, unset)
}

// codeList is keys as a JSON list literal, [] when there are none.
func codeList(keys []string) string {
	if keys == nil {
		return "[]"
	}
	b, _ := json.Marshal(keys) // strings always encode
	return string(b)
}

// codeString is s as a JSON string literal.
func codeString(s string) string {
	b, _ := json.Marshal(s) // a string always encodes
	return string(b)
}

// codeObject is m as a JSON object literal, keys sorted.
func codeObject(m map[string]string) string {
	if len(m) == 0 {
		return "{}"
	}
	b, _ := json.Marshal(m) // strings always encode
	return string(b)
}

// codeBashQuote is s single-quoted for bash.
func codeBashQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
