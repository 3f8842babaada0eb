package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestServeStartPacing through the real binary: with a low --start-rate,
// key A's burst of one-shot runs passes and the next is a 429 with a
// Retry-After and a message naming the flag; key B, at its share of one
// session, is refused more creates than its burst holds for its share,
// never for pacing, and once it deletes its session it starts another:
// a refusal for the share spends no start.
func TestServeStartPacing(t *testing.T) {
	const rate = 0.02 // 50 s a start after the burst: none comes back during the test
	srv := startServer(t, "--start-rate", strconv.FormatFloat(rate, 'g', -1, 64), "--max-sessions-per-key", "1")
	for i := range sandbox.MinStartBurst {
		if code, b := srv.call(t, keyA, "POST", "/v1/run", strings.NewReader(`{"command":["true"]}`), "application/json"); code != http.StatusOK {
			t.Fatalf("keyA's run %d of its burst of %d = %d %s, want 200", i, sandbox.MinStartBurst, code, b)
		}
	}
	code, retry, msg := srv.refusal(t, keyA, "/v1/run", `{"command":["true"]}`)
	if secs, err := strconv.Atoi(retry); code != http.StatusTooManyRequests || err != nil || secs < 1 || secs > 60 || !strings.Contains(msg, "--start-rate") {
		t.Errorf("keyA's run past its burst = %d, Retry-After %q, %q; want 429, 1 to 60 s, naming --start-rate", code, retry, msg)
	}

	id := srv.newSession(t, keyB, nil)
	for i := range sandbox.MinStartBurst + 10 {
		code, _, msg := srv.refusal(t, keyB, "/v1/sessions", `{}`)
		if code != http.StatusTooManyRequests || strings.Contains(msg, "--start-rate") || !strings.Contains(msg, "--max-sessions-per-key") {
			t.Fatalf("keyB's create %d past its share of 1 = %d %q, want 429 naming --max-sessions-per-key, not --start-rate", i, code, msg)
		}
	}
	if code, b := srv.call(t, keyB, "DELETE", sessionPath(id), nil, ""); code != http.StatusNoContent {
		t.Fatalf("deleting keyB's session = %d %s, want 204", code, b)
	}
	if code, b := srv.call(t, keyB, "POST", "/v1/sessions", strings.NewReader(`{}`), "application/json"); code != http.StatusCreated {
		t.Errorf("keyB's create after its delete, its refused creates before = %d %s, want 201", code, b)
	}
}

// refusal sends a POST as key and returns the status, the Retry-After
// header and the error's message.
func (s *apiServer) refusal(t *testing.T, key, path, body string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), cmdTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", s.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil && resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST %s: reading the answer: %v", path, err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), e.Error.Message
}
