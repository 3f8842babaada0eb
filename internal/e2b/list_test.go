package e2b

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// listIDs lists with query and answers the ids, the next token and the
// status.
func listIDs(t *testing.T, h http.Handler, key, path string) ([]string, string, int) {
	t.Helper()
	w := controlCall(h, "GET", path, key, "")
	if w.Code != http.StatusOK {
		return nil, "", w.Code
	}
	var page []listedJSON
	if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil {
		t.Fatalf("list answered %s: %v", w.Body, err)
	}
	ids := []string{}
	for _, l := range page {
		ids = append(ids, l.SandboxID)
	}
	return ids, w.Header().Get("X-Next-Token"), w.Code
}

// TestListSandboxes: the caller's sandboxes, running and paused unless
// the state filter asks for one, filtered and ordered as asked.
func TestListSandboxes(t *testing.T) {
	_, f, h := newControlServer(t, nil)
	var ids []string
	for _, md := range []string{`{"app":"a b"}`, `{"app":"x"}`, `{"app":"a b","n":"1"}`} {
		ids = append(ids, created(t, h, ctlKeyAlice, `{"templateID":"base","metadata":`+md+`}`).SandboxID)
	}
	ci := created(t, h, ctlKeyAlice, `{"templateID":"code-interpreter-v1"}`).SandboxID
	created(t, h, ctlKeyBob, `{"templateID":"base"}`)
	paused := created(t, h, ctlKeyAlice, `{"templateID":"base"}`).SandboxID
	if w := controlCall(h, "POST", "/sandboxes/"+paused+"/pause", ctlKeyAlice, ""); w.Code != http.StatusNoContent {
		t.Fatalf("pause = %d %s", w.Code, w.Body)
	}
	// A session made through Warden's own API is no E2B sandbox.
	if _, err := f.Create(t.Context(), "alice", f.lastOptions); err != nil {
		t.Fatal(err)
	}
	// The SDK encodes each key and value, then the whole query again.
	md := url.QueryEscape("app=" + url.QueryEscape("a b"))
	tests := []struct {
		name, query string
		want        []string
		status      int
	}{
		{"all, newest first", "", []string{paused, ci, ids[2], ids[1], ids[0]}, 200},
		{"oldest first", "?order=asc", []string{ids[0], ids[1], ids[2], ci, paused}, 200},
		{"metadata", "?metadata=" + md, []string{ids[2], ids[0]}, 200},
		{"two metadata pairs", "?metadata=" + url.QueryEscape("app=a%20b&n=1"), []string{ids[2]}, 200},
		{"template", "?template=code-interpreter-v1", []string{ci}, 200},
		{"running", "?state=running", []string{ci, ids[2], ids[1], ids[0]}, 200},
		{"running and paused", "?state=running,paused", []string{paused, ci, ids[2], ids[1], ids[0]}, 200},
		{"paused", "?state=paused", []string{paused}, 200},
		{"started after", "?order=asc&startedAfter=" + url.QueryEscape(f.epoch.Add(3e9).Format("2006-01-02T15:04:05Z07:00")), []string{ids[2], ci, paused}, 200},
		{"bad state", "?state=stopped", nil, 400},
		{"bad order", "?order=up", nil, 400},
		{"bad limit", "?limit=0", nil, 400},
		{"limit too big", "?limit=101", nil, 400},
		{"bad token", "?nextToken=xyz", nil, 400},
		{"bad time", "?startedAfter=yesterday", nil, 400},
		{"bad metadata", "?metadata=%25zz", nil, 400},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, status := listIDs(t, h, ctlKeyAlice, "/v2/sandboxes"+tt.query)
			if status != tt.status || (status == 200 && !slices.Equal(got, tt.want)) {
				t.Errorf("list%s = %d %v, want %d %v", tt.query, status, got, tt.status, tt.want)
			}
		})
	}
	if got, _, _ := listIDs(t, h, ctlKeyAlice, "/sandboxes"); !slices.Equal(got, []string{ids[0], ids[1], ids[2], ci, paused}) {
		t.Errorf("old list = %v, want all five, oldest first", got)
	}
	if got, _, _ := listIDs(t, h, ctlKeyAlice, "/sandboxes?metadata="+md); !slices.Equal(got, []string{ids[0], ids[2]}) {
		t.Errorf("old list by metadata = %v, want %v", got, []string{ids[0], ids[2]})
	}
	if _, _, status := listIDs(t, h, "", "/v2/sandboxes"); status != http.StatusUnauthorized {
		t.Errorf("list without a key = %d, want 401", status)
	}
}

// TestListPages: X-Next-Token walks every sandbox once, in order, and the
// last page has no token.
func TestListPages(t *testing.T) {
	_, _, h := newControlServer(t, nil)
	var want []string
	for range 7 {
		want = append(want, created(t, h, ctlKeyAlice, `{"templateID":"base"}`).SandboxID)
	}
	for _, order := range []string{"asc", "desc"} {
		t.Run(order, func(t *testing.T) {
			wantOrder := slices.Clone(want)
			if order == "desc" {
				slices.Reverse(wantOrder)
			}
			var got []string
			token := ""
			for pages := 0; pages < 10; pages++ {
				q := "?limit=3&order=" + order
				if token != "" {
					q += "&nextToken=" + url.QueryEscape(token)
				}
				ids, next, status := listIDs(t, h, ctlKeyAlice, "/v2/sandboxes"+q)
				if status != http.StatusOK || len(ids) > 3 {
					t.Fatalf("page %d = %d with %d items, want 200 with at most 3", pages, status, len(ids))
				}
				got = append(got, ids...)
				if token = next; token == "" {
					break
				}
			}
			if !slices.Equal(got, wantOrder) {
				t.Errorf("pages gave %v, want %v", got, wantOrder)
			}
		})
	}
	if _, next, _ := listIDs(t, h, ctlKeyAlice, "/v2/sandboxes?limit=7"); next != "" {
		t.Errorf("a page holding everything has X-Next-Token %q, want none", next)
	}
}

// TestRegistryForgetsGone: a sandbox whose session ended behind the
// front end's back (reaped, or deleted through Warden's API) is
// forgotten when next looked up or listed, and a full registry makes room
// by forgetting such sandboxes before it refuses.
func TestRegistryForgetsGone(t *testing.T) {
	s, f, h := newControlServer(t, func(c *Config) { c.MaxSandboxes = 2 })
	a := created(t, h, ctlKeyAlice, `{"templateID":"base"}`).SandboxID
	b := created(t, h, ctlKeyAlice, `{"templateID":"base"}`).SandboxID
	w := controlCall(h, "POST", "/v2/sandboxes", ctlKeyAlice, `{"templateID":"base"}`)
	errorBody(t, w, http.StatusTooManyRequests, "too many E2B sandboxes")
	if n := len(f.List("alice")); n != 2 {
		t.Errorf("%d sessions after a refused create, want 2 (the refused one's ended)", n)
	}
	f.drop(a)
	created(t, h, ctlKeyAlice, `{"templateID":"base"}`)
	if n := s.sandboxes.len(); n != 2 {
		t.Errorf("registry holds %d after a sweep, want 2", n)
	}
	f.drop(b)
	errorBody(t, controlCall(h, "GET", "/sandboxes/"+b, ctlKeyAlice, ""), http.StatusNotFound, "not found")
	if s.sandboxes.peek(b) != nil {
		t.Error("a gone sandbox is still registered after a lookup")
	}
	for _, id := range []string{a, b} {
		if strings.Contains(controlCall(h, "GET", "/v2/sandboxes", ctlKeyAlice, "").Body.String(), id) {
			t.Errorf("gone sandbox %s is listed", id)
		}
	}
}

// registryHeld is how many sandboxes g remembers, live or ended, and the
// bytes of what callers gave at create (metadata and envVars) it holds.
func registryHeld(g *registry) (entries, bytes int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, sb := range g.byID {
		for _, m := range []map[string]string{sb.Metadata, sb.Env} {
			for k, v := range m {
				bytes += len(k) + len(v)
			}
		}
	}
	return len(g.byID) + len(g.ended), bytes
}

// TestRegistryBounded: sandboxes created with big metadata and envVars
// and then killed or reaped leave nothing of those behind, and the
// entries of reaped ones are dropped without any call looking them up.
func TestRegistryBounded(t *testing.T) {
	s, f, h := newControlServer(t, nil)
	big := strings.Repeat("x", 60<<10)
	body := `{"templateID":"base","metadata":{"m":"` + big + `"},"envVars":{"E":"` + big + `"}}`
	const n = 300
	for i := range n {
		sb := created(t, h, ctlKeyAlice, body)
		if i%2 == 0 {
			f.drop(sb.SandboxID) // reaped behind the front end's back
			continue
		}
		if w := controlCall(h, "DELETE", "/sandboxes/"+sb.SandboxID, ctlKeyAlice, ""); w.Code != http.StatusNoContent {
			t.Fatalf("kill = %d", w.Code)
		}
	}
	entries, bytes := registryHeld(s.sandboxes)
	live := s.sandboxes.len()
	if live > minSweep {
		t.Errorf("registry holds %d sandboxes after %d were created and ended, want at most %d", live, n, minSweep)
	}
	if want := live * 2 * (len(big) + 1); bytes > want {
		t.Errorf("registry holds %d bytes of metadata and envVars for %d sandboxes, want at most %d (none of ended ones)", bytes, live, want)
	}
	if entries > n {
		t.Errorf("registry remembers %d sandboxes, want at most %d", entries, n)
	}
}
