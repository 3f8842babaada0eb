package streammux

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame types. Every frame is a 9-byte header (type, channel id, n, both
// big-endian uint32s); only a data frame (n bytes) and the hello
// (helloLen bytes) have a payload.
const (
	// frameOpen opens channel id; n is 0.
	frameOpen byte = 1
	// frameData carries n bytes (1 to MaxPayload) of channel id.
	frameData byte = 2
	// frameCredit lets the receiver's peer send n more bytes on id.
	frameCredit byte = 3
	// frameClose says its sender writes no more on id; n is 0.
	frameClose byte = 4
	// frameStop says its sender reads no more on id (CloseRead, or all
	// was read after the peer's close): the peer's writes fail with
	// ErrStopped, and once both ends sent both close and stop the
	// channel's slot is free; n is 0.
	frameStop byte = 5
	// frameHello is each end's first frame: id is the protocol version,
	// the payload the sender's Window, MaxPayload and MaxChannels.
	frameHello byte = 6
	// frameResume is the first frame a peer sends on a connection that
	// replaced the one a quiesced stream stood on (a box restored from a
	// checkpoint): id is the protocol version, the payload the nonce the
	// quiesced end was armed with (Mux.ArmResume). It ends the old stream
	// where it stood and hands its connection on (ResumeOn); anywhere else
	// it is a breach.
	frameResume byte = 7
)

// ResumeNonceLen is the length of a resume frame's nonce.
const ResumeNonceLen = 16

// version is the protocol version a hello carries.
const version = 1

// helloLen is the length of a hello's payload.
const helloLen = 12

// headerLen is the length of a frame's header.
const headerLen = 9

// ErrProtocol is a peer that broke the stream's framing or its bounds;
// the stream ends with it, and the error says which rule was broken.
var ErrProtocol = errors.New("the peer broke the stream protocol")

// ErrMismatch is a peer whose hello names another version or Config, or
// whose resume frame another version: the two ends were built or
// configured apart, and the stream ends at once naming both sides'
// figures.
var ErrMismatch = errors.New("the peer's stream config differs from ours")

// hello is the payload of this end's hello for cfg.
func hello(cfg Config) []byte {
	b := make([]byte, helloLen)
	binary.BigEndian.PutUint32(b[0:4], uint32(cfg.Window))
	binary.BigEndian.PutUint32(b[4:8], uint32(cfg.MaxPayload))
	binary.BigEndian.PutUint32(b[8:12], uint32(cfg.MaxChannels))
	return b
}

// checkHello compares the peer's hello with ours.
func checkHello(h header, p []byte, cfg Config) error {
	if h.typ != frameHello {
		return fmt.Errorf("%w: its first frame, of type %s, is not its hello", ErrProtocol, frameName(h.typ))
	}
	w, mp, mc := binary.BigEndian.Uint32(p[0:4]), binary.BigEndian.Uint32(p[4:8]), binary.BigEndian.Uint32(p[8:12])
	if h.id != version || w != uint32(cfg.Window) || mp != uint32(cfg.MaxPayload) || mc != uint32(cfg.MaxChannels) {
		return fmt.Errorf("%w: peer version %d Window %d MaxPayload %d MaxChannels %d, ours %d, %d, %d, %d; configure both ends alike",
			ErrMismatch, h.id, w, mp, mc, version, cfg.Window, cfg.MaxPayload, cfg.MaxChannels)
	}
	return nil
}

// header is one parsed frame header.
type header struct {
	typ byte
	id  uint32
	n   uint32
}

// putHeader encodes h into b[:headerLen].
func putHeader(b []byte, h header) {
	b[0] = h.typ
	binary.BigEndian.PutUint32(b[1:5], h.id)
	binary.BigEndian.PutUint32(b[5:9], h.n)
}

// parseHeader decodes and checks the rules a header obeys on its own:
// a known type, a channel id, and the n its type allows.
func parseHeader(b []byte, maxPayload int) (header, error) {
	h := header{typ: b[0], id: binary.BigEndian.Uint32(b[1:5]), n: binary.BigEndian.Uint32(b[5:9])}
	if h.id == 0 {
		return h, fmt.Errorf("%w: a frame for channel 0, which no end opens", ErrProtocol)
	}
	switch h.typ {
	case frameOpen, frameClose, frameStop:
		if h.n != 0 {
			return h, fmt.Errorf("%w: %s frame for channel %d with length %d, not 0", ErrProtocol, frameName(h.typ), h.id, h.n)
		}
	case frameData:
		if h.n == 0 || h.n > uint32(maxPayload) {
			return h, fmt.Errorf("%w: data frame for channel %d of %d bytes, outside 1 to %d", ErrProtocol, h.id, h.n, maxPayload)
		}
	case frameCredit:
		if h.n == 0 {
			return h, fmt.Errorf("%w: credit of 0 bytes for channel %d", ErrProtocol, h.id)
		}
	case frameHello:
		if h.n != helloLen {
			return h, fmt.Errorf("%w: hello of %d bytes, not %d", ErrProtocol, h.n, helloLen)
		}
	case frameResume:
		if h.n != ResumeNonceLen {
			return h, fmt.Errorf("%w: resume of %d bytes, not %d", ErrProtocol, h.n, ResumeNonceLen)
		}
	default:
		return h, fmt.Errorf("%w: unknown frame type %d", ErrProtocol, h.typ)
	}
	return h, nil
}

// frameName names a known frame type for errors.
func frameName(t byte) string {
	switch t {
	case frameOpen:
		return "open"
	case frameData:
		return "data"
	case frameCredit:
		return "credit"
	case frameStop:
		return "stop"
	case frameHello:
		return "hello"
	case frameResume:
		return "resume"
	default:
		return "close"
	}
}
