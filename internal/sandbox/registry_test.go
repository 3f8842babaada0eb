package sandbox

import (
	"errors"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// TestNewBackendNames: "" is the default backend, and an unknown name is
// refused in one line naming every registered backend.
func TestNewBackendNames(t *testing.T) {
	b, err := NewBackend("", BackendOptions{})
	if err != nil || b.Name() != DefaultBackend {
		t.Errorf("NewBackend(\"\") = %v, %v; want the %s backend", b, err, DefaultBackend)
	}
	_, err = NewBackend("kata", BackendOptions{})
	if !errors.Is(err, spec.ErrInvalid) || strings.Contains(err.Error(), "\n") {
		t.Fatalf("NewBackend(kata) error = %v, want one line wrapping ErrInvalid", err)
	}
	for _, name := range BackendNames() {
		if !strings.Contains(err.Error(), name) {
			t.Errorf("NewBackend(kata) error %q does not name %q", err, name)
		}
	}
	if got, want := BackendChoices(), "native, gvisor or docker"; got != want {
		t.Errorf("BackendChoices() = %q, want %q", got, want)
	}
}
