package streammux

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// oneWay is a stream whose peer's bytes are fixed and whose writes go
// nowhere.
type oneWay struct{ io.Reader }

func (oneWay) Write(p []byte) (int, error) { return len(p), nil }
func (oneWay) Close() error                { return nil }

func (oneWay) SetDeadline(time.Time) error { return nil }

// seeds are peer streams for both fuzz targets.
func seeds() [][]byte {
	return [][]byte{
		cat(hi(), frame(frameOpen, 1, 0, nil), frame(frameData, 1, 3, []byte("abc")), frame(frameClose, 1, 0, nil)),
		cat(hi(), frame(frameOpen, 1, 0, nil), frame(frameCredit, 1, 1, nil)),
		cat(hi(), frame(frameOpen, 1, 0, nil), frame(frameOpen, 3, 0, nil), frame(frameData, 3, 16, bytes.Repeat([]byte{1}, 16))),
		cat(hi(), frame(frameData, 2, 16, bytes.Repeat([]byte{2}, 16)), frame(frameClose, 2, 0, nil), frame(frameStop, 2, 0, nil)),
		cat(hi(), []byte{2, 0, 0, 0, 1, 0, 0, 0, 0}),
	}
}

// checkBound fails t if m's channels and the local side's (forgotten or
// not) buffer more than bound bytes, or m ended without a cause.
func checkBound(t *testing.T, m *Mux, local []*Channel, bound int) {
	t.Helper()
	<-m.Done()
	if m.Err() == nil {
		t.Fatal("the stream ended without a cause")
	}
	total := buffered(m)
	m.mu.Lock()
	for _, ch := range local {
		if m.chans[ch.id] != ch {
			ch.mu.Lock()
			total += ch.size
			ch.mu.Unlock()
		}
	}
	m.mu.Unlock()
	if total > bound {
		t.Fatalf("the peer made its end buffer %d bytes, more than %d", total, bound)
	}
}

// FuzzReader feeds any bytes to a Mux as its peer's: it must end (the
// bytes run out or break a rule), never panic, and never buffer more
// than MaxChannels windows, whatever the peer sends and nobody reads.
func FuzzReader(f *testing.F) {
	for _, s := range seeds() {
		f.Add(s)
	}
	cfg := smallConfig()
	f.Fuzz(func(t *testing.T, peer []byte) {
		m, err := New(oneWay{bytes.NewReader(peer)}, cfg, false)
		if err != nil {
			t.Fatal(err)
		}
		checkBound(t, m, nil, cfg.MaxChannels*cfg.Window)
	})
}

// FuzzLocalSide runs a script of local opens, closes and reads beside
// any peer bytes: whatever the order, the end never panics and never
// buffers more than 2*MaxChannels windows.
func FuzzLocalSide(f *testing.F) {
	for i, s := range seeds() {
		f.Add([]byte{0, 1, byte(i), 2, 3, 0, 4}, s)
	}
	cfg := smallConfig()
	f.Fuzz(func(t *testing.T, script, peer []byte) {
		m, err := New(oneWay{bytes.NewReader(peer)}, cfg, true)
		if err != nil {
			t.Fatal(err)
		}
		var chans []*Channel
		for i, op := range script {
			chans = step(m, chans, op, i)
		}
		checkBound(t, m, chans, 2*cfg.MaxChannels*cfg.Window)
	})
}

// step does one scripted local action on m: open, close either way, or
// read without waiting; its channel is chosen by i.
func step(m *Mux, chans []*Channel, op byte, i int) []*Channel {
	if op%5 == 0 || len(chans) == 0 {
		if ch, err := m.Open(); err == nil {
			chans = append(chans, ch)
		}
		return chans
	}
	ch := chans[i%len(chans)]
	switch op % 5 {
	case 1:
		ch.CloseWrite() //nolint:errcheck // the stream may have ended
	case 2:
		ch.CloseRead()
	case 3:
		ch.SetReadDeadline(time.Now())
		ch.Read(make([]byte, int(op))) //nolint:errcheck // nothing may have come
	default:
		ch.Close() //nolint:errcheck // the stream may have ended
	}
	return chans
}
