// Package strictjson decodes a message that must be exactly one JSON
// value of a known shape: what the host reads from a sandbox (its init's
// events and status, an interpreter's replies) and what warden and
// warden-init send each other. A field the receiver does not know is an
// error, so a message from another build fails loudly and never loses a
// setting, and a message from a hostile sandbox carries nothing unread.
package strictjson

import (
	"bytes"
	"encoding/json"
	"errors"
)

// ErrTrailing is a message with more after its one JSON value than
// whitespace.
var ErrTrailing = errors.New("more than one JSON value")

// Decode decodes exactly one JSON value from b into v, refusing a field
// v does not have; b may end in JSON whitespace (a line's newline).
func Decode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	// The rest is checked in place rather than by another Token, which
	// would allocate for whatever follows.
	if len(bytes.TrimLeft(b[dec.InputOffset():], " \t\r\n")) != 0 {
		return ErrTrailing
	}
	return nil
}
