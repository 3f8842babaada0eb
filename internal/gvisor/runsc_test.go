package gvisor

import (
	"os"
	"regexp"
	"testing"
)

func TestParseRunscVersion(t *testing.T) {
	tests := []struct {
		out   string
		want  RunscVersion
		ok    bool
		older bool
	}{
		{"runsc version v0.0.0-20260905035102-160fafc42237\nspec: 1.2.1\n",
			RunscVersion{"v0.0.0-20260905035102-160fafc42237", "20260905"}, true, false},
		{"runsc version 0.0~20221219.0\nspec: 1.0.2-dev\n", RunscVersion{"0.0~20221219.0", "20221219"}, true, true},
		{"runsc version release-20270101.0\n", RunscVersion{"release-20270101.0", "20270101"}, true, false},
		{"runsc version VERSION_MISSING\nspec: 1.2.1\n", RunscVersion{"VERSION_MISSING", ""}, true, true},
		{"runsc version \n", RunscVersion{}, false, false},
		{"runc version 1.1.5\n", RunscVersion{}, false, false},
		{"runsc version a\x1b[2Jb\n", RunscVersion{}, false, false},
		{"", RunscVersion{}, false, false},
	}
	for _, tt := range tests {
		got, ok := ParseRunscVersion([]byte(tt.out))
		if got != tt.want || ok != tt.ok {
			t.Errorf("ParseRunscVersion(%q) = %+v, %v, want %+v, %v", tt.out, got, ok, tt.want, tt.ok)
		}
		if ok && got.OlderThanPin() != tt.older {
			t.Errorf("%+v.OlderThanPin() = %v, want %v", got, got.OlderThanPin(), tt.older)
		}
	}
}

// TestPinnedRunscDate keeps PinnedRunscDate the date of the pseudo-version
// tools/gvisor/go.mod pins, which make runsc builds.
func TestPinnedRunscDate(t *testing.T) {
	mod, err := os.ReadFile("../../tools/gvisor/go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*gvisor\.dev/gvisor v0\.0\.0-([0-9]{8})[0-9]{6}-[0-9a-f]{12}\b`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("tools/gvisor/go.mod requires no gvisor.dev/gvisor pseudo-version")
	}
	if got := string(m[1]); got != PinnedRunscDate {
		t.Errorf("tools/gvisor/go.mod pins gvisor of %s, PinnedRunscDate = %s", got, PinnedRunscDate)
	}
}
