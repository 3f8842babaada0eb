package e2b

import (
	"bytes"
	"compress/gzip"
	"net/http/httptest"
	"strings"
	"testing"
)

// gzipBomb is n zero bytes, gzipped: about a thousandth of n.
func gzipBomb(t *testing.T, n int) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zeros := make([]byte, 1<<20)
	for range n >> 20 {
		if _, err := zw.Write(zeros); err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestEnvdRefusesCompressedRequests: a gzip-compressed Connect request,
// unary or streamed, is refused before anything inflates it, on both envd
// services.
func TestEnvdRefusesCompressedRequests(t *testing.T) {
	s, _, _ := newControlServer(t, nil)
	bomb := gzipBomb(t, 32<<20)
	frame := append([]byte{1, byte(len(bomb) >> 24), byte(len(bomb) >> 16), byte(len(bomb) >> 8), byte(len(bomb))}, bomb...)
	tests := []struct {
		name, path, contentType, header string
		body                            []byte
	}{
		{"unary fs", "/filesystem.Filesystem/Stat", "application/json", "Content-Encoding", bomb},
		{"unary process", "/process.Process/List", "application/json", "Content-Encoding", bomb},
		{"stream process", "/process.Process/Start", "application/connect+json", "Connect-Content-Encoding", frame},
		{"stream fs", "/filesystem.Filesystem/WatchDir", "application/connect+json", "Connect-Content-Encoding", frame},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest("POST", tt.path, bytes.NewReader(tt.body))
			r.Header.Set("Content-Type", tt.contentType)
			r.Header.Set(tt.header, "gzip")
			w := httptest.NewRecorder()
			s.envd.ServeHTTP(w, r)
			body := w.Body.String()
			if !strings.Contains(body, "unimplemented") || !strings.Contains(body, "gzip") {
				t.Errorf("= %d %s, want Connect's unimplemented error naming gzip", w.Code, body)
			}
		})
	}
}
