package streammux

import (
	"fmt"
	"time"
)

// Config bounds a Mux. Both ends of a stream must use the same Config:
// each enforces the other's frames against its own figures, and the
// hellos they exchange first end the stream with ErrMismatch if not.
type Config struct {
	// Window is how many bytes one channel's receiver holds for it unread
	// (and not yet credited back): the most a flood on one channel can
	// make the other end buffer for it, and the sender's pace once it is
	// full.
	Window int
	// MaxChannels bounds the channels each end may have open at once
	// (opened by it and not yet closed and stopped by both ends), so a
	// peer's channels cost at most MaxChannels*Window of its receiver's
	// memory, and the receiver's own as many again.
	MaxChannels int
	// MaxPayload bounds one data frame, and so what another channel's
	// frame waits for each data frame ahead of it on the stream.
	MaxPayload int
	// WriteTimeout bounds one frame's write: a peer that reads nothing
	// for that long ends the stream rather than hold its writers for ever.
	WriteTimeout time.Duration
}

// DefaultConfig is the Config the agent protocol uses: 128 KiB a channel
// (a 100 MB stream runs at the rate the measurement in the package doc
// gives), 32 channels an end (10 concurrent execs' stdio and control), so
// at most 8 MiB buffered on either end.
func DefaultConfig() Config {
	return Config{Window: 128 << 10, MaxChannels: 32, MaxPayload: 32 << 10, WriteTimeout: 10 * time.Second}
}

// maxPayloadLimit bounds MaxPayload itself, which sizes a buffer.
const maxPayloadLimit = 1 << 20

// check says what is wrong with c, if anything.
func (c Config) check() error {
	switch {
	case c.MaxPayload < 1 || c.MaxPayload > maxPayloadLimit:
		return fmt.Errorf("stream config: MaxPayload %d is outside 1 to %d", c.MaxPayload, maxPayloadLimit)
	case c.Window < c.MaxPayload || c.Window > 1<<30:
		return fmt.Errorf("stream config: Window %d is outside MaxPayload (%d) to 1 GiB", c.Window, c.MaxPayload)
	case c.MaxChannels < 1 || c.MaxChannels > 1<<16:
		return fmt.Errorf("stream config: MaxChannels %d is outside 1 to 65536", c.MaxChannels)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("stream config: WriteTimeout %v is not positive", c.WriteTimeout)
	}
	return nil
}
