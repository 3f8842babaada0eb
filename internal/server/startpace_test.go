package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestStartPacedAnswer: a start the Manager refuses for start pacing is a
// 429 too_many_sessions whose message names the flag, with Retry-After in
// whole seconds rounded up and at most an hour, on both paths that start a sandbox.
func TestStartPacedAnswer(t *testing.T) {
	tests := []struct {
		wait time.Duration
		want string
	}{
		{1500 * time.Millisecond, "2"},
		{10 * time.Millisecond, "1"},
		{3 * time.Second, "3"},
		{2 * time.Hour, "3600"},
		{1<<63 - 1, "3600"},
	}
	for _, tt := range tests {
		h := newHarness(t, nil)
		h.fake.err = &sandbox.StartPacedError{Rate: 5, Burst: 100, Wait: tt.wait}
		for _, req := range []struct{ target, body string }{
			{"/v1/sessions", "{}"},
			{"/v1/run", `{"command":["true"]}`},
		} {
			resp := h.do("POST", req.target, keyA, req.body)
			code, msg := resp.errorMessage()
			if resp.status != http.StatusTooManyRequests || code != codeTooMany || !strings.Contains(msg, "--start-rate") {
				t.Errorf("%s paced for %v: got %d %s, want 429 %s naming --start-rate", req.target, tt.wait, resp.status, resp.body, codeTooMany)
			}
			if got := resp.header.Get("Retry-After"); got != tt.want {
				t.Errorf("%s paced for %v: Retry-After %q, want %q", req.target, tt.wait, got, tt.want)
			}
		}
	}
}

// TestTooManySaysWhich: a 429 carries the Manager's line, which names
// the bound that was reached (the key's memory budget and its flag, the
// key's share), not one generic line for all of them.
func TestTooManySaysWhich(t *testing.T) {
	tests := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("%w: this key's sessions and runs hold 12GiB of memory and disk; the key's budget is 12GiB (set by --max-memory-per-key): delete a session or ask for less", sandbox.ErrTooMany), "--max-memory-per-key"},
		{fmt.Errorf("%w: this key holds 32 sessions and runs, its limit is 32; delete a session or retry later", sandbox.ErrTooMany), "its limit is 32"},
		{sandbox.ErrTooMany, "too many sessions: delete one or wait for one to expire"},
	}
	for _, tt := range tests {
		h := newHarness(t, nil)
		h.fake.err = tt.err
		resp := h.do("POST", "/v1/sessions", keyA, "{}")
		if code, msg := resp.errorMessage(); resp.status != http.StatusTooManyRequests || code != codeTooMany || !strings.Contains(msg, tt.want) {
			t.Errorf("%v: got %d %s, want 429 %s saying %q", tt.err, resp.status, resp.body, codeTooMany, tt.want)
		}
	}
}

// TestListUnavailable: a listing the shared sessions store did not
// answer is a 503 unavailable with the public line, naming none of the
// store's detail, which only the log gets.
func TestListUnavailable(t *testing.T) {
	h := newHarness(t, nil)
	failed := &sandbox.RemoteListError{Err: fmt.Errorf("listing claims (warden.dev/owner=abc): dial tcp 10.96.0.1:443: connection refused")}
	h.fake.err = failed
	resp := h.do("GET", "/v1/sessions", keyA, "")
	code, msg := resp.errorMessage()
	if resp.status != http.StatusServiceUnavailable || code != codeUnavailable || msg != failed.Public() {
		t.Errorf("got %d %s %q, want 503 %s with the public line", resp.status, code, msg, codeUnavailable)
	}
	if b := string(resp.body); strings.Contains(b, "10.96.0.1") || strings.Contains(b, "owner") {
		t.Errorf("answer %s names the store's detail", resp.body)
	}
}

// TestListPacedAnswer: a listing the Manager refuses for listing pacing
// is a 429 with Retry-After in whole seconds, rounded up.
func TestListPacedAnswer(t *testing.T) {
	h := newHarness(t, nil)
	h.fake.err = &sandbox.ListPacedError{Wait: 300 * time.Millisecond}
	resp := h.do("GET", "/v1/sessions", keyA, "")
	if code, _ := resp.errorMessage(); resp.status != http.StatusTooManyRequests || code != codeTooMany {
		t.Errorf("a paced listing: got %d %s, want 429 %s", resp.status, resp.body, codeTooMany)
	}
	if got := resp.header.Get("Retry-After"); got != "1" {
		t.Errorf("a paced listing: Retry-After %q, want \"1\"", got)
	}
}
