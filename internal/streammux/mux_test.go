package streammux

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// testWait bounds every wait of these tests; nothing here should take
// near it, and it is no figure of speed.
const testWait = 20 * time.Second

// smallConfig makes bounds easy to reach.
func smallConfig() Config {
	return Config{Window: 64, MaxChannels: 3, MaxPayload: 16, WriteTimeout: testWait}
}

// pair connects two Muxes over a pipe; both are closed with the test.
func pair(t *testing.T, cfg Config) (host, agent *Mux) {
	t.Helper()
	a, b := net.Pipe()
	host, err := New(a, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	agent, err = New(b, cfg, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close(); agent.Close() })
	return host, agent
}

func open(t *testing.T, m *Mux) *Channel {
	t.Helper()
	ch, err := m.Open()
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

func accept(t *testing.T, m *Mux) *Channel {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testWait)
	defer cancel()
	ch, err := m.Accept(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return ch
}

// within fails the test if fn has not returned within testWait.
func within(t *testing.T, what string, fn func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); fn() }()
	select {
	case <-done:
	case <-time.After(testWait):
		t.Fatalf("%s did not end within %v", what, testWait)
	}
}

func TestChannelCarriesBytesBothWaysThenEOF(t *testing.T) {
	host, agent := pair(t, smallConfig())
	hc, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	ac := accept(t, agent)
	if hc.ID() != ac.ID() {
		t.Fatalf("ids: host %d, agent %d", hc.ID(), ac.ID())
	}
	want := bytes.Repeat([]byte("0123456789"), 100) // 15 windows
	within(t, "the exchange", func() {
		go func() {
			if _, err := hc.Write(want); err != nil {
				t.Error(err)
			}
			if err := hc.CloseWrite(); err != nil {
				t.Error(err)
			}
		}()
		got, err := io.ReadAll(ac)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("agent read %d bytes (%v), want %d", len(got), err, len(want))
		}
		go func() {
			if _, err := ac.Write([]byte("back")); err != nil {
				t.Error(err)
			}
			if err := ac.CloseWrite(); err != nil {
				t.Error(err)
			}
		}()
		got, err = io.ReadAll(hc)
		if err != nil || string(got) != "back" {
			t.Errorf("host read %q (%v), want %q", got, err, "back")
		}
	})
}

// A flood on a channel nobody reads stalls that channel only: another
// carries on, and the flooded end buffers at most one window of it.
func TestFloodOnOneChannelLeavesOthersFlowing(t *testing.T) {
	cfg := smallConfig()
	host, agent := pair(t, cfg)
	flood, ctl := open(t, host), open(t, host)
	floodIn := accept(t, agent)
	ctlIn := accept(t, agent)
	type result struct {
		n   int
		err error
	}
	wrote := make(chan result, 1)
	go func() { n, err := flood.Write(make([]byte, 100*cfg.Window)); wrote <- result{n, err} }()
	within(t, "control exchanges beside the flood", func() {
		for i := range 20 {
			msg := []byte{byte(i)}
			if _, err := ctl.Write(msg); err != nil {
				t.Errorf("control write %d: %v", i, err)
				return
			}
			got := make([]byte, 1)
			if _, err := io.ReadFull(ctlIn, got); err != nil || got[0] != byte(i) {
				t.Errorf("control read %d: got %v (%v)", i, got, err)
				return
			}
		}
	})
	floodIn.mu.Lock()
	buffered, capacity := floodIn.size, cap(floodIn.buf)
	floodIn.mu.Unlock()
	if buffered > cfg.Window || capacity > cfg.Window {
		t.Errorf("the flooded end buffers %d bytes in %d, more than the window of %d", buffered, capacity, cfg.Window)
	}
	select {
	case r := <-wrote:
		t.Errorf("the flood's write ended (%d bytes, %v) though nobody read", r.n, r.err)
	default:
	}
	floodIn.CloseRead()
	within(t, "the flood once its reader is gone", func() {
		if r := <-wrote; !errors.Is(r.err, ErrStopped) || r.n > 2*cfg.Window {
			t.Errorf("flood wrote %d bytes (%v), want at most %d and ErrStopped", r.n, r.err, 2*cfg.Window)
		}
	})
}

// Two ends flooding each other on every channel at once never wait for
// each other: the reader of a stream never writes to it.
func TestBothEndsFloodingDoNotDeadlock(t *testing.T) {
	cfg := smallConfig()
	host, agent := pair(t, cfg)
	var chans [2][3]*Channel
	for i := range 3 {
		chans[0][i] = open(t, host)
		chans[1][i] = accept(t, agent)
	}
	within(t, "the crossed floods", func() {
		errs := make(chan error, 12)
		for _, side := range chans {
			for _, ch := range side {
				go func() { _, err := ch.Write(make([]byte, 50*cfg.Window)); errs <- errors.Join(err, ch.CloseWrite()) }()
				go func() { n, err := io.Copy(io.Discard, ch); errs <- errors.Join(err, wantN(n, 50*cfg.Window)) }()
			}
		}
		for range 12 {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

func wantN(got int64, want int) error {
	if got != int64(want) {
		return fmt.Errorf("read %d bytes, want %d", got, want)
	}
	return nil
}

// Channels closed both ways free their slots at both ends alike: opening
// and closing many times the limit from either end breaks nothing.
func TestClosedChannelsFreeTheirSlots(t *testing.T) {
	cfg := smallConfig()
	host, agent := pair(t, cfg)
	within(t, "the open and close cycles", func() {
		for i := range 5 * cfg.MaxChannels {
			opener, peer := host, agent
			if i%2 == 1 {
				opener, peer = agent, host
			}
			var open []*Channel
			for range cfg.MaxChannels {
				ch, err := opener.Open()
				if err != nil {
					t.Fatalf("cycle %d: %v", i, err)
				}
				open = append(open, ch)
			}
			if _, err := opener.Open(); err == nil {
				t.Fatalf("cycle %d: an open past MaxChannels succeeded", i)
			}
			for _, ch := range open {
				in := accept(t, peer)
				closed := make(chan error, 1)
				go func() { closed <- in.Close() }()
				if err := errors.Join(ch.Close(), <-closed); err != nil {
					t.Fatalf("cycle %d: closing: %v", i, err)
				}
			}
			waitFreed(t, opener)
		}
	})
	if err := errors.Join(host.Err(), agent.Err()); err != nil {
		t.Fatalf("the stream ended: %v", err)
	}
}

// waitFreed waits, bounded, until m has no channel open.
func waitFreed(t *testing.T, m *Mux) {
	t.Helper()
	for range 2000 {
		m.mu.Lock()
		n := len(m.chans)
		m.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("channels closed both ways were never freed")
}

func TestPeerThatReadsNothingEndsTheStream(t *testing.T) {
	cfg := smallConfig()
	cfg.WriteTimeout = 50 * time.Millisecond
	a, b := net.Pipe()
	defer b.Close()
	m, err := New(a, cfg, true)
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Open() // b is never read: the write cannot go on
	if !errors.Is(err, ErrProtocol) {
		t.Fatalf("open to a peer that reads nothing: %v, want ErrProtocol", err)
	}
	within(t, "the stream's end", func() { <-m.Done() })
}

func TestCloseUnblocksWaiters(t *testing.T) {
	host, agent := pair(t, smallConfig())
	ch := open(t, host)
	accept(t, agent)
	errs := make(chan error, 2)
	go func() { _, err := ch.Read(make([]byte, 1)); errs <- err }()
	go func() { _, err := ch.Write(make([]byte, 1000)); errs <- err }()
	waitWaiters(t, ch, 2)
	within(t, "a blocked read and write after Close", func() {
		if err := host.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		for range 2 {
			if err := <-errs; !errors.Is(err, ErrClosed) {
				t.Errorf("waiter got %v, want ErrClosed", err)
			}
		}
	})
}

func TestBadConfigIsRefused(t *testing.T) {
	good := DefaultConfig()
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"no payload", func(c *Config) { c.MaxPayload = 0 }},
		{"window below payload", func(c *Config) { c.Window = c.MaxPayload - 1 }},
		{"no channels", func(c *Config) { c.MaxChannels = 0 }},
		{"no write timeout", func(c *Config) { c.WriteTimeout = 0 }},
	} {
		cfg := good
		tc.edit(&cfg)
		a, b := net.Pipe()
		if m, err := New(a, cfg, true); err == nil {
			m.Close()
			t.Errorf("%s: New accepted %+v", tc.name, cfg)
		}
		a.Close()
		b.Close()
	}
}

// A peer that never writes, or never reads, holds a channel's reader or
// writer only until its deadline; the channel still works after.
func TestDeadlinesBoundReadAndWrite(t *testing.T) {
	cfg := smallConfig()
	host, agent := pair(t, cfg)
	ch := open(t, host)
	in := accept(t, agent)
	within(t, "the read and write past their deadlines", func() {
		ch.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		if _, err := ch.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("read with nothing sent: %v, want os.ErrDeadlineExceeded", err)
		}
		ch.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		n, err := ch.Write(make([]byte, 2*cfg.Window)) // nobody reads in
		if !errors.Is(err, os.ErrDeadlineExceeded) || n != cfg.Window {
			t.Errorf("write past the credit: %d bytes, %v; want %d and os.ErrDeadlineExceeded", n, err, cfg.Window)
		}
		ch.SetReadDeadline(time.Time{})
		go func() {
			if _, err := in.Write([]byte("late")); err != nil {
				t.Error(err)
			}
		}()
		got := make([]byte, 4)
		if _, err := io.ReadFull(ch, got); err != nil || string(got) != "late" {
			t.Errorf("read after the deadline was lifted: %q, %v", got, err)
		}
	})
}
