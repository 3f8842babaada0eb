package doctor

import (
	"errors"
	"strings"
	"testing"
)

// TestExecutorStatus: warden-exec absent is fine, present and trusted is
// fine and says one-shot runs (warden run, and the server's and MCP's
// without a pooled box; not sessions nor pooled boxes) use it unless a default run would not
// (native.FastVerdict), which it names; present but untrusted, or of
// another build, is a warning naming why.
func TestExecutorStatus(t *testing.T) {
	untrusted := errors.New("/opt/warden-exec is not trusted: it must be owned by root or this user")
	tests := []struct {
		name       string
		p          string
		err        error
		present    bool
		verdict    error
		want       Status
		wantDetail string
	}{
		{"absent", "", errors.New("warden-exec not found next to /opt/warden; run make build"), false, nil, OK, "not found"},
		{"trusted", "/opt/warden-exec", nil, true, nil, OK, "present and trusted: a default one-shot native run (warden run, and warden serve's and warden mcp's one-shot runs without a pooled box; --executor auto) uses it"},
		{"trusted, sessions", "/opt/warden-exec", nil, true, nil, OK, "sessions and pooled boxes keep the Go init"},
		{"cgroup v2", "/opt/warden-exec", nil, true, errors.New("cgroup v2 hosts are not yet covered by the differential test"), OK,
			"a default one-shot run uses the Go init: cgroup v2 hosts are not yet covered"},
		{"untrusted", "", untrusted, true, nil, Warn, "is not trusted"},
		{"another build", "", errors.New("warden-exec: /opt/warden-exec reads plan version \"1\n\" but this warden writes version 2"), true, nil, Warn, "plan version"},
	}
	for _, tt := range tests {
		c := executorStatus(tt.p, tt.err, tt.present, tt.verdict)
		if c.Status != tt.want || !strings.Contains(c.Detail, tt.wantDetail) {
			t.Errorf("%s: status %s detail %q, want %s with %q", tt.name, c.Status, c.Detail, tt.want, tt.wantDetail)
		}
	}
}
