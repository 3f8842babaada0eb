package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// upload sends body as a file to path in session id.
func (h *harness) upload(id, query, body string) response {
	h.t.Helper()
	req := newRequest("PUT", "/v1/sessions/"+id+"/files?"+query, body)
	req.Header.Set("Content-Type", "application/octet-stream")
	return h.send(req, keyA)
}

func TestFilesRoundTrip(t *testing.T) {
	h := newHarness(t, nil)
	id := h.create(keyA)
	files := "/v1/sessions/" + id + "/files"

	resp := h.upload(id, "path=data/in.csv&mode=0755", "a,b\n1,2\n")
	var e fileEntryJSON
	if err := json.Unmarshal(resp.body, &e); resp.status != http.StatusCreated || err != nil {
		t.Fatalf("upload: got %d %s", resp.status, resp.body)
	}
	if e.Path != "/workspace/data/in.csv" || e.Name != "in.csv" || e.Type != "file" || e.Size != 8 || e.Mode != "0755" {
		t.Errorf("upload entry: got %+v", e)
	}

	resp = h.do("GET", files+"?path=/workspace/data/in.csv", keyA, "")
	if resp.status != http.StatusOK || string(resp.body) != "a,b\n1,2\n" ||
		resp.header.Get("Content-Type") != "application/octet-stream" || resp.header.Get("Content-Length") != "8" {
		t.Errorf("download: got %d %v %q", resp.status, resp.header, resp.body)
	}

	resp = h.do("POST", files+"/mkdir?path=out/deep", keyA, "")
	if err := json.Unmarshal(resp.body, &e); resp.status != http.StatusCreated || err != nil || e.Type != "dir" || e.Size != 0 {
		t.Errorf("mkdir: got %d %s", resp.status, resp.body)
	}

	resp = h.do("GET", files+"/list", keyA, "")
	var list fileListJSON
	if err := json.Unmarshal(resp.body, &list); resp.status != http.StatusOK || err != nil {
		t.Fatalf("list: got %d %s", resp.status, resp.body)
	}
	var names []string
	for _, e := range list.Entries {
		names = append(names, e.Path+":"+e.Type)
	}
	if list.Path != "/workspace" || list.Truncated || strings.Join(names, " ") != "/workspace/data:dir /workspace/out:dir" {
		t.Errorf("list: got %s", resp.body)
	}

	tests := []struct {
		name, method, target string
		status               int
		code                 string
	}{
		{"non-empty dir without recursive", "DELETE", files + "?path=data", 409, "conflict"},
		{"download a directory", "GET", files + "?path=data", 400, "bad_request"},
		{"path out of the workspace", "GET", files + "?path=../etc/passwd", 400, "bad_request"},
		{"absolute path elsewhere", "GET", files + "?path=/etc/passwd", 400, "bad_request"},
		{"mkdir over a file", "POST", files + "/mkdir?path=data/in.csv", 409, "conflict"},
		{"recursive delete", "DELETE", files + "?path=data&recursive=true", 204, ""},
		{"deleted file is gone", "GET", files + "?path=data/in.csv", 404, "not_found"},
		{"list a missing dir", "GET", files + "/list?path=nope", 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := h.do(tt.method, tt.target, keyA, "")
			code, msg := resp.errorMessage()
			if resp.status != tt.status || code != tt.code || strings.Contains(msg, "\n") {
				t.Errorf("got %d %s, want %d %s", resp.status, resp.body, tt.status, tt.code)
			}
		})
	}
}

func TestUploadLimit(t *testing.T) {
	h := newHarness(t, func(c *Config) { c.MaxUploadBytes = 16 })
	id := h.create(keyA)
	if resp := h.upload(id, "path=ok", strings.Repeat("x", 16)); resp.status != http.StatusCreated {
		t.Errorf("upload at the limit: got %d %s", resp.status, resp.body)
	}
	// Without a Content-Length the limit is found while streaming.
	req := newRequest("PUT", "/v1/sessions/"+id+"/files?path=big", "")
	req.Body = readCloser{strings.NewReader(strings.Repeat("x", 17))}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/octet-stream")
	for name, resp := range map[string]response{
		"announced": h.upload(id, "path=big", strings.Repeat("x", 17)),
		"streamed":  h.send(req, keyA),
	} {
		_, msg := resp.errorMessage()
		if resp.status != http.StatusRequestEntityTooLarge || msg != "request body is larger than the 16B limit" {
			t.Errorf("%s upload over the limit: got %d %s", name, resp.status, resp.body)
		}
	}
	if resp := h.do("GET", "/v1/sessions/"+id+"/files?path=big", keyA, ""); resp.status != http.StatusNotFound {
		t.Errorf("an upload over the limit left a file: %d %s", resp.status, resp.body)
	}
	h.healthy()
}

type readCloser struct{ *strings.Reader }

func (readCloser) Close() error { return nil }
