package template

import (
	"path/filepath"
	"strings"
	"testing"
)

// openStore opens an empty store in a fresh temporary directory, so
// each test has its own and none sees another's templates.
func openStore(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "templates"), o)
	if err != nil {
		t.Fatalf("opening the store: %v", err)
	}
	return s
}

// TestNames checks the reserved and malformed names.
func TestNames(t *testing.T) {
	s := openStore(t, Options{})
	for _, tc := range []struct{ name, want string }{
		{"host", "reserved"}, {"", "use 1-63"}, {"Upper", "use 1-63"}, {"../x", "use 1-63"}, {"nope", "no template"},
	} {
		if err := s.Remove(tc.name); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Remove(%q): got %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}
