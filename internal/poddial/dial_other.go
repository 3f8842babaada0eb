//go:build !linux

// Package poddial is the router's side of a sandbox Pod's agent
// (internal/podinit); agent sessions, and so this package, are Linux-only.
// Attach has no form here: it returns an agent session, which exists on
// Linux only, so its callers are Linux-only too.
package poddial

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"net"

	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
)

// Dial is Linux-only, like the sessions it starts.
func Dial(context.Context, string, ed25519.PrivateKey) (*net.TCPConn, podinit.Adoption, error) {
	return nil, 0, fmt.Errorf("dialing a Pod's agent: %w", errors.ErrUnsupported)
}

// Refuse refuses every spec off Linux, where no session runs.
func Refuse(spec.Spec) error {
	return fmt.Errorf("a Pod's session: %w", errors.ErrUnsupported)
}
