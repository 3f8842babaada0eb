package doctor

import (
	"errors"
	"strings"
	"testing"
)

// TestExecutorStatus: warden-exec absent is fine, present and trusted is
// fine and says one-shot runs use it, present but untrusted is a warning
// naming why.
func TestExecutorStatus(t *testing.T) {
	untrusted := errors.New("/opt/warden-exec is not trusted: it must be owned by root or this user")
	tests := []struct {
		name       string
		p          string
		err        error
		present    bool
		want       Status
		wantDetail string
	}{
		{"absent", "", errors.New("warden-exec not found next to /opt/warden; run make build"), false, OK, "not found"},
		{"trusted", "/opt/warden-exec", nil, true, OK, "present and trusted: one-shot native runs (warden run, --executor auto) use it"},
		{"untrusted", "", untrusted, true, Warn, "is not trusted"},
	}
	for _, tt := range tests {
		c := executorStatus(tt.p, tt.err, tt.present)
		if c.Status != tt.want || !strings.Contains(c.Detail, tt.wantDetail) {
			t.Errorf("%s: status %s detail %q, want %s with %q", tt.name, c.Status, c.Detail, tt.want, tt.wantDetail)
		}
	}
}
