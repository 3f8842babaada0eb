package streammux

import (
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// frame encodes one frame as a hostile peer may write it, payload and
// all, whatever its header says.
func frame(typ byte, id, n uint32, payload []byte) []byte {
	b := make([]byte, headerLen, headerLen+len(payload))
	putHeader(b, header{typ: typ, id: id, n: n})
	return append(b, payload...)
}

// hi is smallConfig's hello, the first frame a peer must send.
func hi() []byte {
	return frame(frameHello, version, helloLen, hello(smallConfig()))
}

// loopbackPair connects two TCP sockets over loopback, which, unlike
// net.Pipe, can be closed one way.
func loopbackPair(t *testing.T) (net.Conn, *net.TCPConn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	b, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	a, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b.(*net.TCPConn)
}

func cat(frames ...[]byte) []byte { return bytes.Join(frames, nil) }

// feed runs a Mux (not the initiator) against a peer that sends its
// hello and then raw bytes, and returns why its stream ended.
func feed(t *testing.T, cfg Config, peer []byte) error {
	t.Helper()
	return feedRaw(t, cfg, cat(hi(), peer))
}

// feedRaw is feed without the hello.
func feedRaw(t *testing.T, cfg Config, peer []byte) error {
	t.Helper()
	return feedArmed(t, cfg, nil, peer)
}

// feedArmed is feedRaw on a Mux armed for a resume with nonce (none if
// nil).
func feedArmed(t *testing.T, cfg Config, nonce, peer []byte) error {
	t.Helper()
	a, b := loopbackPair(t)
	m, err := New(a, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if nonce != nil {
		if err := m.ArmResume(nonce); err != nil {
			t.Fatal(err)
		}
	}
	go io.Copy(io.Discard, b) //nolint:errcheck // the credit the mux writes back
	go func() {
		b.Write(peer) //nolint:errcheck // the mux may end the stream part way
		// Half-close: the mux reads our end and still writes its own.
		b.CloseWrite() //nolint:errcheck // the mux may have ended the stream
	}()
	within(t, "the hostile stream's end", func() { <-m.Done() })
	return m.Err()
}

func TestHostileFramesEndTheStreamWithTheirCause(t *testing.T) {
	cfg := smallConfig()
	open1 := frame(frameOpen, 1, 0, nil)
	full := bytes.Repeat([]byte{'x'}, cfg.MaxPayload)
	fill := cat(open1, frame(frameData, 1, 16, full), frame(frameData, 1, 16, full), frame(frameData, 1, 16, full), frame(frameData, 1, 16, full))
	for _, tc := range []struct {
		name, want string
		peer       []byte
	}{
		{"unknown type", "unknown frame type 9", frame(9, 1, 0, nil)},
		{"channel 0", "channel 0, which no end opens", frame(frameOpen, 0, 0, nil)},
		{"open with a length", "open frame for channel 1 with length 5", frame(frameOpen, 1, 5, nil)},
		{"close with a length", "close frame for channel 1 with length 1", cat(open1, frame(frameClose, 1, 1, nil))},
		{"empty data", "data frame for channel 1 of 0 bytes", cat(open1, frame(frameData, 1, 0, nil))},
		{"data past MaxPayload", "data frame for channel 1 of 17 bytes, outside 1 to 16", cat(open1, frame(frameData, 1, 17, nil))},
		{"huge length", "of 4294967295 bytes", cat(open1, frame(frameData, 1, 1<<32-1, nil))},
		{"zero credit", "credit of 0 bytes", cat(open1, frame(frameCredit, 1, 0, nil))},
		{"data past the window", "1 bytes on channel 1, which had room for 0", cat(fill, frame(frameData, 1, 1, []byte{'y'}))},
		{"data on a channel never opened", "data frame for channel 1, which is not open", frame(frameData, 1, 1, []byte{'y'})},
		{"credit on a channel never opened", "credit frame for channel 5, which is not open", frame(frameCredit, 5, 1, nil)},
		{"open of our parity", "opened channel 2 where 1 was next", frame(frameOpen, 2, 0, nil)},
		{"open out of order", "opened channel 3 where 1 was next", frame(frameOpen, 3, 0, nil)},
		{"open again", "opened channel 1 where 3 was next", cat(open1, open1)},
		{"too many channels", "more than 3 channels at once", cat(open1, frame(frameOpen, 3, 0, nil), frame(frameOpen, 5, 0, nil), frame(frameOpen, 7, 0, nil))},
		{"second close", "a second close of channel 1", cat(open1, frame(frameClose, 1, 0, nil), frame(frameClose, 1, 0, nil))},
		{"data after close", "data on channel 1 after its close", cat(open1, frame(frameClose, 1, 0, nil), frame(frameData, 1, 1, []byte{'y'}))},
		{"credit past the window", "credit of 1 bytes on channel 1, past its window of 64", cat(open1, frame(frameCredit, 1, 1, nil))},
		{"stop with a length", "stop frame for channel 1 with length 2", cat(open1, frame(frameStop, 1, 2, nil))},
		{"second stop", "a second stop of channel 1", cat(open1, frame(frameStop, 1, 0, nil), frame(frameStop, 1, 0, nil))},
		{"credit after stop", "credit on channel 1 after its stop", cat(open1, frame(frameStop, 1, 0, nil), frame(frameCredit, 1, 1, nil))},
		{"credit after close and stop", "credit on channel 1 after its stop", cat(open1, frame(frameClose, 1, 0, nil), frame(frameStop, 1, 0, nil), frame(frameCredit, 1, 1, nil))},
		{"stop on a channel never opened", "stop frame for channel 1, which is not open", frame(frameStop, 1, 0, nil)},
		{"second hello", "a second hello", hi()},
		{"resume on a stream never quiesced", "a resume frame on a stream that was not quiesced", frame(frameResume, version, ResumeNonceLen, testNonce)},
		{"short resume", "resume of 4 bytes, not 16", frame(frameResume, version, 4, nil)},
		{"short hello", "hello of 4 bytes, not 12", frame(frameHello, version, 4, nil)},
		{"truncated header", "ended inside a frame", open1[:5]},
		{"truncated payload", "ended inside a frame", cat(open1, frame(frameData, 1, 4, []byte{'y'}))},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := feed(t, cfg, tc.peer)
			if !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrProtocol saying %q", err, tc.want)
			}
		})
	}
}

func TestFirstFrameMustBeTheHello(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		peer       []byte
		is         error
	}{
		{"open first", "its first frame, of type open, is not its hello", frame(frameOpen, 1, 0, nil), ErrProtocol},
		{"resume first", "its first frame, of type resume, is not its hello", frame(frameResume, version, ResumeNonceLen, testNonce), ErrProtocol},
		{"other version", "peer version 2", frame(frameHello, 2, helloLen, hello(smallConfig())), ErrMismatch},
		{"other window", "Window 128 MaxPayload 16 MaxChannels 3, ours 1, 64, 16, 3", frame(frameHello, version, helloLen, hello(Config{Window: 128, MaxPayload: 16, MaxChannels: 3})), ErrMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := feedRaw(t, smallConfig(), tc.peer)
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %v saying %q", err, tc.is, tc.want)
			}
		})
	}
}

func TestCleanHangUpIsNoBreach(t *testing.T) {
	err := feed(t, smallConfig(), cat(frame(frameOpen, 1, 0, nil), frame(frameData, 1, 3, []byte("abc"))))
	if err == nil || errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "closed the stream") {
		t.Fatalf("got %v, want the peer's hang-up", err)
	}
}

// A peer's opens stop at the last id, as ours do, rather than wrap and
// reuse ids.
func TestPeerOpenPastTheLastIDIsABreach(t *testing.T) {
	a, b := loopbackPair(t)
	m, err := New(a, smallConfig(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.mu.Lock()
	m.peerNext = 1<<31 + 1 // as after 2^30 opens and closes
	m.mu.Unlock()
	go io.Copy(io.Discard, b) //nolint:errcheck // the hello the mux writes
	if _, err := b.Write(cat(hi(), frame(frameOpen, 1<<31+1, 0, nil))); err != nil {
		t.Fatal(err)
	}
	within(t, "the stream's end", func() { <-m.Done() })
	if err := m.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "past the last id") {
		t.Errorf("got %v, want ErrProtocol saying past the last id", err)
	}
}
