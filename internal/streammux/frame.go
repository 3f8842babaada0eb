package streammux

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Frame types. Every frame is a 9-byte header (type, channel id, n, both
// big-endian uint32s); only a data frame has a payload, of n bytes.
const (
	// frameOpen opens channel id; n is 0.
	frameOpen byte = 1
	// frameData carries n bytes (1 to MaxPayload) of channel id.
	frameData byte = 2
	// frameCredit lets the receiver's peer send n more bytes on id.
	frameCredit byte = 3
	// frameClose says its sender writes no more on id; n is 0.
	frameClose byte = 4
)

// headerLen is the length of a frame's header.
const headerLen = 9

// ErrProtocol is a peer that broke the stream's framing or its bounds;
// the stream ends with it, and the error says which rule was broken.
var ErrProtocol = errors.New("the peer broke the stream protocol")

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
	case frameOpen, frameClose:
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
	default:
		return "close"
	}
}
