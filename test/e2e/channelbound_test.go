package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestStreamChannelBound: on the default gVisor server (the stream) an
// E2B sandbox's code contexts stop far below their cap of 32, at the
// stream's channel bound, and the refusal reaches the client as a 429
// that says what to do, not a 500; deleting a context lets the refused
// one run. Warden's own HTTP API cannot reach the bound: it names no
// interpreter and runs one exec at a time (its 503 is a unit test's,
// TestNoChannelSaysHowToFreeOne).
func TestStreamChannelBound(t *testing.T) {
	requireBackend(t, "gvisor")
	srv := e2bServer(t, backendArgs("gvisor")...)
	sb := srv.e2bCreate(t, keyA)
	h := envd(sb.SandboxID, sb.EnvdAccessToken, "application/json")
	h.Set("E2b-Sandbox-Port", "49999")
	run := func(ctx string) (int, string) {
		body := fmt.Sprintf(`{"code":"6 * 7","context_id":%q}`, ctx)
		code, b := srv.e2bCall(t, http.MethodPost, "/execute", h, strings.NewReader(body))
		return code, string(b)
	}
	const contextCap = 32
	var made []string
	refused := ""
	for i := range contextCap {
		code, b := srv.e2bCall(t, http.MethodPost, "/contexts", h, strings.NewReader(`{"language":"python"}`))
		var c struct{ ID string }
		if code != http.StatusOK || json.Unmarshal(b, &c) != nil || c.ID == "" {
			t.Fatalf("POST /contexts %d = %d %s, want 200 with an id", i, code, b)
		}
		code, out := run(c.ID)
		if code == http.StatusOK {
			made = append(made, c.ID)
			continue
		}
		if code != http.StatusTooManyRequests || !strings.Contains(out, "too many processes and interpreters") || !strings.Contains(out, "kill a command or delete a code context") {
			t.Fatalf("running code context %d = %d %q, want 429 naming the channel bound and its fix", i, code, out)
		}
		refused = c.ID
		break
	}
	if refused == "" {
		t.Fatalf("all %d code contexts ran: the stream's channel bound did not apply", contextCap)
	}
	t.Logf("the stream ran %d code contexts before refusing the next", len(made))
	if len(made) < 5 {
		t.Errorf("only %d code contexts ran, want about 7 (docs/e2b.md)", len(made))
	}
	if code, b := srv.e2bCall(t, http.MethodDelete, "/contexts/"+made[0], h, nil); code/100 != 2 {
		t.Fatalf("DELETE /contexts/%s = %d %s", made[0], code, b)
	}
	if code, out := run(refused); code != http.StatusOK || !strings.Contains(out, "42") {
		t.Errorf("the refused context after a delete = %d %q, want 200 with 42", code, out)
	}
}
