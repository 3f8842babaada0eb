package gvisor

import (
	"strings"
	"testing"
)

// TestCompressionValidate: every listed value and "" (the default) pass,
// anything else is one line naming them all.
func TestCompressionValidate(t *testing.T) {
	for _, c := range append([]Compression{""}, compressions...) {
		if err := c.Validate(); err != nil {
			t.Errorf("Compression(%q).Validate() = %v, want nil", c, err)
		}
	}
	for _, bad := range []Compression{"flate-best-speed", "None", "fast "} {
		err := bad.Validate()
		if err == nil || !strings.Contains(err.Error(), "want none or fast") || strings.Contains(err.Error(), "\n") {
			t.Errorf("Compression(%q).Validate() = %v, want one line naming none or fast", bad, err)
		}
	}
}
