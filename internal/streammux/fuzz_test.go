package streammux

import (
	"bytes"
	"io"
	"testing"
)

// oneWay is a stream whose peer's bytes are fixed and whose writes go
// nowhere.
type oneWay struct{ io.Reader }

func (oneWay) Write(p []byte) (int, error) { return len(p), nil }
func (oneWay) Close() error                { return nil }

// FuzzReader feeds any bytes to a Mux as its peer's: it must end (the
// bytes run out or break a rule), never panic, and never buffer more
// than MaxChannels windows, whatever the peer sends and nobody reads.
func FuzzReader(f *testing.F) {
	f.Add(cat(frame(frameOpen, 1, 0, nil), frame(frameData, 1, 3, []byte("abc")), frame(frameClose, 1, 0, nil)))
	f.Add(cat(frame(frameOpen, 1, 0, nil), frame(frameCredit, 1, 1, nil)))
	f.Add(cat(frame(frameOpen, 1, 0, nil), frame(frameOpen, 3, 0, nil), frame(frameData, 3, 16, bytes.Repeat([]byte{1}, 16))))
	f.Add([]byte{2, 0, 0, 0, 1, 0, 0, 0, 0})
	cfg := smallConfig()
	f.Fuzz(func(t *testing.T, peer []byte) {
		m, err := New(oneWay{bytes.NewReader(peer)}, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		<-m.Done()
		if m.Err() == nil {
			t.Fatal("the stream ended without a cause")
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		total := 0
		for _, ch := range m.chans {
			ch.mu.Lock()
			total += ch.buf.Len()
			ch.mu.Unlock()
		}
		if total > cfg.MaxChannels*cfg.Window {
			t.Fatalf("the peer made its end buffer %d bytes, more than %d", total, cfg.MaxChannels*cfg.Window)
		}
	})
}
