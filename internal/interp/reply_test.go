package interp

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/testhost"
)

// hostileDriver stands for a driver that code in the sandbox has taken
// over. For each request it writes the run's token to stdout and stderr,
// then the reply lines the request's code evaluates to (a Python
// expression), and nothing else: each case sends its own "done".
const hostileDriver = `
import json, os
ctl = os.fdopen(3, "rb")
rep = os.fdopen(4, "wb")
def send(line):
    rep.write(line.encode("utf-8", "surrogateescape") + b"\n")
    rep.flush()
send('{"t":"ready"}')
for line in ctl:
    req = json.loads(line)
    token = req["token"].encode()
    os.write(1, token)
    os.write(2, token)
    for l in eval(req["code"]):
        send(l)
`

// hostileLimits are the caps the hostile tests run with.
var hostileLimits = config{maxOutput: 1000, maxTotalOutput: 4000, maxValue: 1000}

// maxKept bounds what the host may keep of one run under hostileLimits:
// the outputs, the value and exception fields (each cut near maxValue)
// and the notes (maxNotes of a few hundred bytes, and the count line).
const maxKept = 4000 + 4*(1000+256+64) + (maxNotes+1)*400

// newHostile returns an interpreter running hostileDriver.
func newHostile(t *testing.T, cfg config) Interpreter {
	t.Helper()
	if !pythonLanguage.availableIn("") {
		testhost.SkipOrFail(t, "python3 is not installed")
	}
	lang := &language{name: "hostile", program: "python3", args: []string{"-c", hostileDriver}, send: writeJSONRequest}
	it := newInterpreter(lang, hostSpawner{dir: t.TempDir()}, testEnv, cfg)
	t.Cleanup(func() { it.Close() })
	return it
}

// kept is how many bytes of a run's replies the host held on to: what the
// Outcome carries and the notes written to stderr.
func kept(r result) int {
	n := len(r.stderr) + len(r.Value)
	if e := r.Exception; e != nil {
		n += len(e.Type) + len(e.Message) + len(e.Traceback)
	}
	for _, o := range r.Outputs {
		n += len(o.MimeType) + len(o.Data) + len(o.Encoding)
	}
	return n
}

// TestHostileReplies: whatever a driver sends, the Run returns and the
// host keeps a bounded amount of it.
func TestHostileReplies(t *testing.T) {
	const done = ` + ['{"t":"done"}']`
	tests := []struct {
		name, code string
		check      func(t *testing.T, r result)
	}{
		{"unknown encoding, long MIME type", `[json.dumps({"t":"output","enc":"x","data":"","mime":"A"*60000})]*40` + done,
			func(t *testing.T, r result) {
				if !strings.Contains(r.stderr, "invalid MIME type") || !strings.Contains(r.stderr, "+24 more notes") {
					t.Errorf("stderr %q, want 16 notes and a count of the other 24", r.stderr)
				}
			}},
		{"unknown encoding", `[json.dumps({"t":"output","enc":"x"*60000,"data":"","mime":"text/plain"})]*40` + done,
			func(t *testing.T, r result) {
				if !strings.Contains(r.stderr, "unknown encoding") {
					t.Errorf("stderr %q does not name the encoding", r.stderr)
				}
			}},
		{"long MIME type", `[json.dumps({"t":"output","enc":"utf-8","data":"x","mime":"a/"+"b"*60000})]*40` + done, nil},
		{"MIME type with escapes", `[json.dumps({"t":"output","enc":"utf-8","data":"x","mime":"text/html\x1b[2J\n"})]*40` + done,
			func(t *testing.T, r result) {
				if strings.ContainsAny(r.stderr, "\x1b") || strings.Count(r.stderr, "\n") != maxNotes+1 {
					t.Errorf("stderr %q, want escaped notes one a line", r.stderr)
				}
			}},
		{"many empty outputs", `[json.dumps({"t":"output","enc":"utf-8","data":"","mime":"a/b"})]*5000` + done,
			func(t *testing.T, r result) {
				if n := len(r.Outputs); n == 0 || n > 4000/(3+outputCost) {
					t.Errorf("kept %d outputs, want some but no more than the total allows", n)
				}
			}},
		{"lines over the limit", `["x"*100000]*40` + done,
			func(t *testing.T, r result) {
				if !strings.Contains(r.stderr, "reply of 100000 bytes was dropped") {
					t.Errorf("stderr %q does not say what was dropped", r.stderr)
				}
			}},
		{"long done", `[json.dumps({"t":"done","value":"v"*15000,"exc":{"type":"T"*15000,"message":"m"*15000,"traceback":"t"*15000}})]`,
			func(t *testing.T, r result) {
				if r.Exception == nil || !strings.Contains(r.Value, "bytes cut") || !strings.Contains(r.Exception.Type, "bytes cut") {
					t.Errorf("value %.20q exception %+.20v, want both cut", r.Value, r.Exception)
				}
			}},
		{"done over the limit", `[json.dumps({"t":"done","value":"v"*200000})]`,
			func(t *testing.T, r result) {
				if r.Value != "" || !strings.Contains(r.stderr, "value and exception were dropped") {
					t.Errorf("value %.20q stderr %q, want the done reply dropped with a note", r.Value, r.stderr)
				}
			}},
	}
	it := newHostile(t, hostileLimits)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mustRun(t, it, tt.code)
			if r.TimedOut || r.Restarted {
				t.Errorf("timed out %v restarted %v, want the run to end normally", r.TimedOut, r.Restarted)
			}
			if n := kept(r); n > maxKept {
				t.Errorf("host kept %d bytes of the run, want at most %d", n, maxKept)
			}
			if tt.check != nil {
				tt.check(t, r)
			}
		})
	}
}

// TestHostileReplyType: a reply of an unknown type is a protocol error
// that does not carry the reply into the error.
func TestHostileReplyType(t *testing.T) {
	it := newHostile(t, hostileLimits)
	ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
	defer cancel()
	o, err := it.Run(ctx, `[json.dumps({"t":"\x1b"*5000})]`, nil, nil)
	if !errors.Is(err, ErrProtocol) || !o.Restarted || len(err.Error()) > 1000 || strings.Contains(err.Error(), "\x1b") {
		t.Errorf("Run: restarted %v err %.200v, want a short ErrProtocol", o.Restarted, err)
	}
}

// TestHostileReplyCount: past maxReplies replies in one run, small as
// they are, the driver is taken for broken: each costs the host a decode.
func TestHostileReplyCount(t *testing.T) {
	tests := []struct {
		name    string
		replies int
		wantErr bool
	}{
		{"at the cap", maxReplies - 1, false},
		{"past the cap", 50 * maxReplies, true},
	}
	it := newHostile(t, hostileLimits)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
			defer cancel()
			code := fmt.Sprintf(`[json.dumps({"t":"output","enc":"utf-8","data":"","mime":"a/b"})]*%d + ['{"t":"done"}']`, tt.replies)
			o, err := it.Run(ctx, code, nil, nil)
			if got := errors.Is(err, ErrProtocol) && o.Restarted; got != tt.wantErr {
				t.Errorf("%d replies: err %v restarted %v, want a protocol error %v", tt.replies, err, o.Restarted, tt.wantErr)
			}
			if tt.wantErr && !strings.Contains(fmt.Sprint(err), "more than 10000 replies in one run") {
				t.Errorf("%d replies: err %v, want it to say the cap", tt.replies, err)
			}
		})
	}
}

// TestUndecodableReply: a reply line that does not decode is a protocol
// error that says why, quoted and cut, never a bare unexpected reply.
func TestUndecodableReply(t *testing.T) {
	tests := []struct{ name, code, want string }{
		{"unknown field", `['{"t":"done","x":1}']`, `unknown field \"x\"`},
		{"not JSON", `['not json']`, "invalid character"},
		{"two values", `['{"t":"done"} {"t":"done"}']`, "more than one JSON value"},
		{"long field name", `['{"' + "\\u001b"*5000 + '":1}']`, "unknown field"},
	}
	it := newHostile(t, hostileLimits)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testRunTimeout)
			defer cancel()
			o, err := it.Run(ctx, tt.code, nil, nil)
			if !errors.Is(err, ErrProtocol) || !o.Restarted || !strings.Contains(fmt.Sprint(err), tt.want) || len(fmt.Sprint(err)) > 300 || strings.Contains(fmt.Sprint(err), "\x1b") {
				t.Errorf("Run: restarted %v err %.300v, want a short ErrProtocol containing %q", o.Restarted, err, tt.want)
			}
		})
	}
}

// TestHostileRepro is the reported attack at the default limits, cut from
// 40 lines to 4 to keep the test fast: lines of 12 MiB MIME types with an
// unknown encoding made the host keep every MIME type in a note.
func TestHostileRepro(t *testing.T) {
	if testing.Short() {
		t.Skip("sends 48 MiB of replies")
	}
	cfg := config{maxOutput: DefaultMaxOutputBytes, maxTotalOutput: DefaultMaxTotalOutputBytes, maxValue: DefaultMaxValueBytes}
	it := newHostile(t, cfg)
	r := mustRun(t, it, `[json.dumps({"t":"output","enc":"x","data":"","mime":"A"*(12<<20)})]*4 + ['{"t":"done"}']`)
	if r.TimedOut {
		t.Fatal("the run timed out")
	}
	if n := len(r.stderr); n > (maxNotes+1)*400 || len(r.Outputs) != 0 {
		t.Errorf("host kept %d bytes of notes and %d outputs, want a few notes and none", n, len(r.Outputs))
	}
}

// TestMaxReplyLine: the longest line read is computed from the caps, not
// a fixed large number.
func TestMaxReplyLine(t *testing.T) {
	def := config{maxOutput: DefaultMaxOutputBytes, maxTotalOutput: DefaultMaxTotalOutputBytes, maxValue: DefaultMaxValueBytes}
	if n := maxReplyLine(def); n < DefaultMaxOutputBytes+4*DefaultMaxValueBytes || n > 15<<20 {
		t.Errorf("default maxReplyLine = %d, want room for one output or value and less than 15 MiB", n)
	}
	if n := maxReplyLine(hostileLimits); n > 100<<10 {
		t.Errorf("maxReplyLine(%+v) = %d, want it to follow the caps", hostileLimits, n)
	}
}

func TestValidMime(t *testing.T) {
	tests := map[string]bool{
		"image/png":                           true,
		"image/svg+xml":                       true,
		"application/vnd.ms-excel":            true,
		"text/x.a_b!#$&^":                     true,
		"a/" + strings.Repeat("b", maxMime-2): true,
		"a/" + strings.Repeat("b", maxMime-1): false,
		"":                                    false,
		"text":                                false,
		"/html":                               false,
		"text/":                               false,
		"text/html/x":                         false,
		"text/html; charset=utf-8":            false,
		"text/html\n":                         false,
		"text/h\x1btml":                       false,
		"téxt/html":                           false,
	}
	for mime, want := range tests {
		if got := validMime(mime); got != want {
			t.Errorf("validMime(%.40q) = %v, want %v", mime, got, want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	if got := excerpt("a\x1bb"); got != `"a\x1bb"` {
		t.Errorf("excerpt = %s, want the string quoted", got)
	}
	long := strings.Repeat("\n", 1<<20)
	if got := excerpt(long); len(got) > 4*excerptLen+32 || strings.Contains(got, "\n") || !strings.HasSuffix(got, "(1048576 bytes)") {
		t.Errorf("excerpt of 1 MiB = %.100q, want a short quoted start and the size", got)
	}
}
