package mcp

import (
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/spec"
)

// maxStreamText bounds each of stdout, stderr, value and traceback in a
// result, so one chatty program cannot flood the model's context; the
// head and the tail are kept, where the interesting parts usually are.
const maxStreamText = 16 << 10

// runOut is the structured result of run_code and run_command: the
// Result's fields a client may act on, with text cut as in the content
// and images only described (their bytes are the image content).
type runOut struct {
	SessionID            string          `json:"session_id,omitempty" jsonschema:"the session the call ran in; empty for a one-off sandbox"`
	ExitCode             int             `json:"exit_code" jsonschema:"exit status, 128+N when signal N killed the program"`
	Signal               string          `json:"signal,omitempty" jsonschema:"the signal that killed the program, if any"`
	TimedOut             bool            `json:"timed_out" jsonschema:"the call hit its time limit and was killed"`
	OOMKilled            bool            `json:"oom_killed" jsonschema:"the program was killed at the memory limit"`
	Stdout               string          `json:"stdout"`
	Stderr               string          `json:"stderr"`
	StdoutTruncated      bool            `json:"stdout_truncated" jsonschema:"stdout was cut, here or at the sandbox's output limit"`
	StderrTruncated      bool            `json:"stderr_truncated" jsonschema:"stderr was cut, here or at the sandbox's output limit"`
	Value                string          `json:"value,omitempty" jsonschema:"repr of the code's trailing expression (run_code in a session)"`
	Exception            *spec.Exception `json:"exception,omitempty" jsonschema:"the exception the code raised, if any"`
	Outputs              []outputInfo    `json:"outputs,omitempty" jsonschema:"rich outputs in order; images are returned as image content"`
	InterpreterRestarted bool            `json:"interpreter_restarted,omitempty" jsonschema:"the interpreter died or was killed: its variables are gone, files are kept"`
	WallTimeMS           float64         `json:"wall_time_ms"`
	CPUTimeMS            float64         `json:"cpu_time_ms"`
	PeakMemoryBytes      int64           `json:"peak_memory_bytes"`
}

type outputInfo struct {
	MimeType string `json:"mime_type"`
	Bytes    int    `json:"bytes" jsonschema:"size of the decoded content"`
	Text     string `json:"text,omitempty" jsonschema:"the content of a text output (HTML, SVG, plain text)"`
}

// outcome is what render needs besides the Result to explain it.
type outcome struct {
	timeout  time.Duration
	language string
	session  string // empty: a one-off sandbox
}

// images are the output types MCP clients can show as images.
var images = map[string]bool{"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true}

// maxImages and maxImagesBytes bound the images one result carries: a
// cell drawing sixty large figures must not make a message no client can
// read (the stdio transport's frames stop at 16 MiB).
const (
	maxImages      = 8
	maxImagesBytes = 8 << 20
)

// render turns a Result into content for the model: one text block that
// says what happened first, then what was printed, then every image. A
// call that failed in any way (status, signal, exception, timeout, memory)
// is an error result, so the model notices.
func render(res spec.Result, o outcome) *sdk.CallToolResult {
	var b strings.Builder
	b.WriteString(status(res, o))
	section(&b, "stdout", res.Stdout)
	section(&b, "stderr", res.Stderr)
	section(&b, "value", res.Value)
	if res.StdoutTruncated || res.StderrTruncated {
		b.WriteString("\n(output went past the sandbox's output limit and was cut; write large output to a file)")
	}
	if e := res.Exception; e != nil {
		section(&b, "traceback", e.Traceback)
	}
	out := &sdk.CallToolResult{IsError: failed(res)}
	var imgs []sdk.Content
	imgBytes := 0
	for i, o := range res.Outputs {
		data, err := decodeOutput(o)
		switch {
		case err != nil:
			fmt.Fprintf(&b, "\n[output %d (%s) could not be decoded: %v]", i+1, o.MimeType, err)
		case images[o.MimeType] && (len(imgs) == maxImages || imgBytes+len(data) > maxImagesBytes):
			fmt.Fprintf(&b, "\n[output %d (%s, %d bytes) left out: a result carries at most %d images and %d MiB of them; save figures to files and read_file the ones you need]",
				i+1, o.MimeType, len(data), maxImages, maxImagesBytes>>20)
		case images[o.MimeType]:
			imgBytes += len(data)
			imgs = append(imgs, &sdk.ImageContent{Data: data, MIMEType: o.MimeType})
		default:
			section(&b, o.MimeType+" output", string(data))
		}
	}
	if len(imgs) > 0 {
		fmt.Fprintf(&b, "\n[%d image(s) attached]", len(imgs))
	}
	out.Content = append([]sdk.Content{&sdk.TextContent{Text: b.String()}}, imgs...)
	return out
}

func failed(res spec.Result) bool {
	return res.ExitCode != 0 || res.Signal != "" || res.TimedOut || res.OOMKilled || res.Exception != nil || res.Error != ""
}

// status is the first line: how the call ended, and what survived it.
func status(res spec.Result, o outcome) string {
	var s string
	switch {
	case res.Error != "":
		s = "warden failed: " + res.Error
	case res.TimedOut:
		s = fmt.Sprintf("timed out after %s", o.timeout)
	case res.OOMKilled:
		s = "killed at the memory limit"
	case res.Exception != nil:
		s = fmt.Sprintf("raised %s: %s", res.Exception.Type, firstLine(res.Exception.Message))
	case res.Signal != "":
		s = "killed by " + res.Signal
	case res.ExitCode != 0:
		s = fmt.Sprintf("exited with status %d", res.ExitCode)
	default:
		s = "ok"
	}
	if res.TimedOut || res.OOMKilled || res.InterpreterRestarted {
		s += kept(res, o)
	}
	return fmt.Sprintf("%s (%.2fs)", s, res.WallTimeMS/1000)
}

// kept says what a killed call left behind, so the model knows whether to
// redo its setup.
func kept(res spec.Result, o outcome) string {
	if o.session == "" {
		return "; the one-off sandbox was discarded"
	}
	s := "; the session and its files are kept"
	if res.InterpreterRestarted {
		s += fmt.Sprintf(", but the %s interpreter was restarted and its variables are gone", o.language)
	}
	return s
}

// section appends a labelled block of text, cut to maxStreamText.
func section(b *strings.Builder, label, text string) {
	if text == "" {
		return
	}
	fmt.Fprintf(b, "\n--- %s ---\n%s", label, strings.TrimSuffix(cut(text, maxStreamText), "\n"))
}

// cut keeps the head and tail of s within max bytes, on rune boundaries,
// with a note of what was left out between them.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	head, tail := s[:max/2], s[len(s)-max/2:]
	for !utf8.ValidString(head) && len(head) > 0 {
		head = head[:len(head)-1]
	}
	for !utf8.ValidString(tail) && len(tail) > 0 {
		tail = tail[1:]
	}
	return fmt.Sprintf("%s\n[... %d bytes cut ...]\n%s", head, len(s)-len(head)-len(tail), tail)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// decodeOutput returns an output's bytes, as its Encoding says.
func decodeOutput(o spec.Output) ([]byte, error) {
	if o.Encoding == "base64" {
		return base64.StdEncoding.DecodeString(o.Data)
	}
	return []byte(o.Data), nil
}

// toRunOut is the structured form of res, cut as the content is.
func toRunOut(res spec.Result, session string) runOut {
	out := runOut{
		SessionID: session, ExitCode: res.ExitCode, Signal: res.Signal, TimedOut: res.TimedOut, OOMKilled: res.OOMKilled,
		Stdout: cut(res.Stdout, maxStreamText), Stderr: cut(res.Stderr, maxStreamText),
		StdoutTruncated: res.StdoutTruncated || len(res.Stdout) > maxStreamText,
		StderrTruncated: res.StderrTruncated || len(res.Stderr) > maxStreamText,
		Value:           cut(res.Value, maxStreamText), InterpreterRestarted: res.InterpreterRestarted,
		WallTimeMS: res.WallTimeMS, CPUTimeMS: res.CPUTimeMS, PeakMemoryBytes: res.PeakMemoryBytes,
	}
	if e := res.Exception; e != nil {
		out.Exception = &spec.Exception{Type: e.Type, Message: cut(e.Message, maxStreamText), Traceback: cut(e.Traceback, maxStreamText)}
	}
	for _, o := range res.Outputs {
		data, _ := decodeOutput(o)
		info := outputInfo{MimeType: o.MimeType, Bytes: len(data)}
		if !images[o.MimeType] {
			info.Text = cut(string(data), maxStreamText)
		}
		out.Outputs = append(out.Outputs, info)
	}
	return out
}
