package server

import (
	"fmt"
	"net/http"
	"testing"
)

// TestTransfersPerSession has a session's uploads stall mid-body and
// checks that past MaxTransfersPerSession its next upload and download are
// answered 503 while another session's are served, and that a finished
// transfer frees its place.
func TestTransfersPerSession(t *testing.T) {
	h := newHarness(t, nil)
	id, other := h.create(keyA), h.create(keyA)
	ls := h.serveLive()
	put := func(session, name string) string {
		return fmt.Sprintf("PUT /v1/sessions/%s/files?path=%s HTTP/1.1\r\nHost: warden.test\r\nAuthorization: Bearer %s"+
			"\r\nContent-Type: application/octet-stream\r\nContent-Length: 1000\r\n\r\npartial", session, name, keyA)
	}
	stalled := ls.dial(t, put(id, "f0"))
	for i := 1; i < MaxTransfersPerSession; i++ {
		ls.dial(t, put(id, fmt.Sprintf("f%d", i)))
	}
	waitFor(t, "the uploads to be under way", func() bool { return h.srv.transfers.count(id) == MaxTransfersPerSession })
	if resp := h.do("GET", "/v1/sessions/"+id+"/files?path=f0", keyA, ""); resp.status != http.StatusServiceUnavailable {
		t.Errorf("download past the bound: got %d %s, want 503", resp.status, resp.body)
	}
	c := ls.dial(t, put(id, "late"))
	if resp, e := readAnswer(t, c); resp.StatusCode != http.StatusServiceUnavailable || e.Error.Code != codeUnavailable {
		t.Errorf("upload past the bound: got %d %q, want 503 unavailable", resp.StatusCode, e.Error.Code)
	}
	c = ls.dial(t, put(other, "f"))
	if _, err := c.Write(make([]byte, 1000-len("partial"))); err != nil {
		t.Fatal(err)
	}
	if resp, e := readAnswer(t, c); resp.StatusCode != http.StatusCreated {
		t.Errorf("another session's upload: got %d %q, want 201", resp.StatusCode, e.Error.Message)
	}
	stalled.Close()
	waitFor(t, "the abandoned upload to end", func() bool { return h.srv.transfers.count(id) < MaxTransfersPerSession })
}

func (t *transfers) count(id string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.active[id]
}
