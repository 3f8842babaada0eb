package streammux

import (
	"context"
	"fmt"
	"time"

	"golang.org/x/time/rate"
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
	// ReadRate bounds, in bytes a second, what the stream's reader takes
	// from the peer (0: no bound), with each frame counted as at least
	// FrameCost bytes. Credit bounds a channel's bytes, not its frames:
	// without this a peer packing thousands of 1-byte frames in each write
	// costs the reader a core for as long as the stream lives. It is this
	// end's own figure, not exchanged in the hello: the reader waits, the
	// peer's writes block, and only the flooding peer is held back.
	ReadRate int
	// FrameCost is the least a frame counts against ReadRate, whatever its
	// length: ReadRate/FrameCost bounds frames a second.
	FrameCost int
}

// DefaultConfig is the Config the agent protocol uses: 128 KiB a channel
// (a 100 MB stream runs at the rate the measurement in the package doc
// gives), 32 channels an end (10 concurrent execs' stdio and control), so
// at most 8 MiB buffered on either end. The reader takes at most 256 MiB
// a second, a frame counting as at least 4 KiB: full 32 KiB frames pass
// untouched up to that rate (drain paces an exec's output at 100 MB/s),
// while a flood of small frames is held to 64k frames a second, about 1%
// of a core.
func DefaultConfig() Config {
	return Config{
		Window: 128 << 10, MaxChannels: 32, MaxPayload: 32 << 10, WriteTimeout: 10 * time.Second,
		ReadRate: 256 << 20, FrameCost: 4 << 10,
	}
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
	case c.ReadRate < 0:
		return fmt.Errorf("stream config: ReadRate %d is negative (0 means no bound)", c.ReadRate)
	case c.FrameCost < 0 || (c.ReadRate > 0 && c.FrameCost > c.ReadRate):
		return fmt.Errorf("stream config: FrameCost %d is outside 0 to ReadRate (%d)", c.FrameCost, c.ReadRate)
	}
	return nil
}

// frameCost is what a frame with n payload bytes counts against
// ReadRate.
func (c Config) frameCost(n int) int {
	return max(headerLen+n, c.FrameCost)
}

// paceChunk is how much the reader takes before it waits for ReadRate:
// 10 ms of it (640 small frames with DefaultConfig), and at least two
// full frames. Fewer, longer waits: each costs a timer and a wake-up,
// which for a wait a frame cost more than the small frames themselves.
func (c Config) paceChunk() int {
	return max(2*c.frameCost(max(c.MaxPayload, helloLen)), c.ReadRate/100)
}

// readBurst is how far ahead of ReadRate the reader may run: two chunks,
// so a chunk (plus the frame that passed it) never waits for more than
// the limiter can hold, and an honest sender's frames seldom wait.
func (c Config) readBurst() int {
	return 2 * c.paceChunk()
}

// pacer makes the reader wait before it handles n bytes' worth of frame
// (a *rate.Limiter; tests count its waits).
type pacer interface {
	WaitN(ctx context.Context, n int) error
}

// newPacer is the pacer for ReadRate, or nil for no bound.
func (c Config) newPacer() pacer {
	if c.ReadRate == 0 {
		return nil
	}
	return rate.NewLimiter(rate.Limit(c.ReadRate), c.readBurst())
}
