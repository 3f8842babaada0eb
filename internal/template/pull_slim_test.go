//go:build slim

package template

import (
	"context"
	"errors"
	"testing"
)

// TestSlimPullUnsupported: in the slim build Pull and Import refuse with
// an error that wraps errors.ErrUnsupported, so a caller can tell "not in
// this build" from a failed pull, and store nothing.
func TestSlimPullUnsupported(t *testing.T) {
	s := openStore(t, Options{})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		call func() error
	}{
		{"Pull", func() error { _, err := s.Pull(ctx, "example.com/x:1", "x", PullOptions{}); return err }},
		{"Import", func() error { _, err := s.Import(ctx, "/nonexistent", "x"); return err }},
	} {
		if err := tc.call(); !errors.Is(err, errors.ErrUnsupported) {
			t.Errorf("%s: got %v, want an error wrapping errors.ErrUnsupported", tc.name, err)
		}
	}
	if infos, err := s.List(); err != nil || len(infos) != 0 {
		t.Errorf("after refused calls: List() = %v, %v; want no templates", infos, err)
	}
}
