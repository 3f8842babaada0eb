package mcp

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path"
	"strings"
	"time"
	"unicode/utf8"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// maxReadBytes bounds the text or bytes read_file returns (a model reads
// far less; more belongs in code that reads it in place), maxImageBytes
// an image it returns whole (charts at a high dpi pass a megabyte), and
// maxWriteBytes what write_file accepts: as base64 in a JSON-RPC message it
// must fit the transports' bounds (4 MiB per HTTP request in the SDK).
const (
	maxReadBytes  = 1 << 20
	maxImageBytes = 4 << 20
	maxWriteBytes = 2 << 20
)

type writeFileIn struct {
	SessionID     string `json:"session_id" jsonschema:"the id create_session returned"`
	Path          string `json:"path" jsonschema:"where to write, relative to /workspace (e.g. data/input.csv) or absolute below it"`
	Content       string `json:"content,omitempty" jsonschema:"the file's text; omit (or leave empty) when giving content_base64"`
	ContentBase64 string `json:"content_base64,omitempty" jsonschema:"the file's bytes in standard base64, for binary files"`
}

type writeOut struct {
	Path string `json:"path" jsonschema:"the file's absolute path in the sandbox"`
	Size int64  `json:"size"`
}

type readFileIn struct {
	SessionID string `json:"session_id" jsonschema:"the id create_session returned"`
	Path      string `json:"path" jsonschema:"the file, relative to /workspace or absolute below it"`
}

type readOut struct {
	Path      string `json:"path" jsonschema:"the file's absolute path in the sandbox"`
	Size      int64  `json:"size" jsonschema:"the whole file's size in bytes"`
	Encoding  string `json:"encoding" jsonschema:"utf-8 (content is the text), base64 (content is the bytes) or image (returned as image content)"`
	Content   string `json:"content,omitempty"`
	Truncated bool   `json:"truncated" jsonschema:"only the start of the file is in content"`
}

type listFilesIn struct {
	SessionID string `json:"session_id" jsonschema:"the id create_session returned"`
	Path      string `json:"path,omitempty" jsonschema:"the directory, relative to /workspace or absolute below it (default: /workspace)"`
}

type listOut struct {
	Path      string      `json:"path"`
	Entries   []entryInfo `json:"entries"`
	Truncated bool        `json:"truncated" jsonschema:"the directory has more entries than were listed"`
}

type entryInfo struct {
	Name       string    `json:"name"`
	Type       string    `json:"type" jsonschema:"file, dir, symlink or other"`
	Size       int64     `json:"size"`
	ModifiedAt time.Time `json:"modified_at"`
}

// files opens the caller's session's workspace.
func (t *tools) files(ctx context.Context, req *sdk.CallToolRequest, tool, id string) (workspace.Files, error) {
	dir, err := t.m.Files(ctx, t.owner(req), id)
	if err != nil {
		return nil, wardenError(tool, err)
	}
	return dir, nil
}

// writeFile writes text or base64 content to a file of the session.
func (t *tools) writeFile(ctx context.Context, req *sdk.CallToolRequest, in writeFileIn) (*sdk.CallToolResult, writeOut, error) {
	data := []byte(in.Content)
	if in.ContentBase64 != "" {
		if in.Content != "" {
			return nil, writeOut{}, fmt.Errorf("write_file: give content or content_base64, not both")
		}
		var err error
		if data, err = base64.StdEncoding.DecodeString(in.ContentBase64); err != nil {
			return nil, writeOut{}, fmt.Errorf("write_file: content_base64 is not standard base64: %w", err)
		}
	}
	if len(data) > maxWriteBytes {
		return nil, writeOut{}, fmt.Errorf("write_file: %d bytes is over the %s limit; write the file in parts from code instead", len(data), spec.FormatSize(maxWriteBytes))
	}
	dir, err := t.files(ctx, req, "write_file", in.SessionID)
	if err != nil {
		return nil, writeOut{}, err
	}
	ent, err := dir.Write(in.Path, strings.NewReader(string(data)), 0)
	if err != nil {
		return nil, writeOut{}, fmt.Errorf("write_file: %w", err)
	}
	out := writeOut{Path: sandboxPath(ent.Path), Size: ent.Size}
	return textResult(fmt.Sprintf("wrote %d bytes to %s", out.Size, out.Path)), out, nil
}

// readFile returns a file as text, an image or base64, bounded.
func (t *tools) readFile(ctx context.Context, req *sdk.CallToolRequest, in readFileIn) (*sdk.CallToolResult, readOut, error) {
	dir, err := t.files(ctx, req, "read_file", in.SessionID)
	if err != nil {
		return nil, readOut{}, err
	}
	rc, ent, err := dir.Read(in.Path)
	if err != nil {
		return nil, readOut{}, fmt.Errorf("read_file: %w", err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxImageBytes))
	if err != nil {
		return nil, readOut{}, fmt.Errorf("read_file %s: %w", in.Path, err)
	}
	mime := http.DetectContentType(data)
	if !images[mime] && len(data) > maxReadBytes {
		data = data[:maxReadBytes]
	}
	out := readOut{Path: sandboxPath(ent.Path), Size: ent.Size, Truncated: ent.Size > int64(len(data))}
	switch {
	case images[mime] && !out.Truncated:
		out.Encoding = "image"
		return &sdk.CallToolResult{Content: []sdk.Content{
			&sdk.TextContent{Text: fmt.Sprintf("%s: %s image, %d bytes", out.Path, mime, out.Size)},
			&sdk.ImageContent{Data: data, MIMEType: mime},
		}}, out, nil
	case isText(trimPartialRune(data, out.Truncated)):
		out.Encoding, out.Content = "utf-8", string(trimPartialRune(data, out.Truncated))
		text := out.Content
		if out.Truncated {
			text += fmt.Sprintf("\n[... cut: the file is %d bytes and only the first %d are shown; use run_command with head, tail or grep for the rest]", out.Size, len(out.Content))
		}
		return textResult(text), out, nil
	case out.Truncated:
		return nil, readOut{}, fmt.Errorf("read_file: %s is %d bytes of binary data, over the %s this tool returns; inspect it with run_command (file, xxd | head) or process it in code", out.Path, out.Size, spec.FormatSize(maxReadBytes))
	}
	out.Encoding, out.Content = "base64", base64.StdEncoding.EncodeToString(data)
	return textResult(fmt.Sprintf("%s is binary (%s, %d bytes); base64:\n%s", out.Path, mime, out.Size, out.Content)), out, nil
}

// isText says whether b reads as text: UTF-8 without NUL bytes.
func isText(b []byte) bool { return utf8.Valid(b) && bytes.IndexByte(b, 0) < 0 }

// trimPartialRune drops an incomplete UTF-8 sequence at the end of a cut
// read, so cutting text mid-character does not make it look binary.
func trimPartialRune(b []byte, cut bool) []byte {
	if !cut {
		return b
	}
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if r, _ := utf8.DecodeLastRune(b); r != utf8.RuneError {
			break
		}
		b = b[:len(b)-1]
	}
	return b
}

// listFiles lists one directory of the session's workspace.
func (t *tools) listFiles(ctx context.Context, req *sdk.CallToolRequest, in listFilesIn) (*sdk.CallToolResult, listOut, error) {
	if in.Path == "" {
		in.Path = "."
	}
	dir, err := t.files(ctx, req, "list_files", in.SessionID)
	if err != nil {
		return nil, listOut{}, err
	}
	self, err := dir.Stat(in.Path)
	if err != nil {
		return nil, listOut{}, fmt.Errorf("list_files: %w", err)
	}
	entries, err := dir.List(in.Path)
	truncated := errors.Is(err, workspace.ErrTruncated)
	if err != nil && !truncated {
		return nil, listOut{}, fmt.Errorf("list_files: %w", err)
	}
	out := listOut{Path: sandboxPath(self.Path), Entries: []entryInfo{}, Truncated: truncated}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d entries", out.Path, len(entries))
	for _, e := range entries {
		out.Entries = append(out.Entries, entryInfo{Name: e.Name, Type: e.Type, Size: e.Size, ModifiedAt: e.ModTime.UTC()})
		name := e.Name
		if e.Type == workspace.TypeDir {
			name += "/"
		}
		fmt.Fprintf(&b, "\n%-7s %10d  %s", e.Type, e.Size, name)
	}
	if truncated {
		fmt.Fprintf(&b, "\n[%v]", err)
	}
	return textResult(b.String()), out, nil
}

// sandboxPath is the absolute path code in the sandbox uses for rel.
func sandboxPath(rel string) string { return path.Join("/workspace", rel) }

func textResult(text string) *sdk.CallToolResult {
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}}
}
