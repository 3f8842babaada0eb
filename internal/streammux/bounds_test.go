package streammux

import (
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"
)

// buffered is what m holds unread of all its channels.
func buffered(m *Mux) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	total := 0
	for _, ch := range m.chans {
		ch.mu.Lock()
		total += ch.size
		ch.mu.Unlock()
	}
	return total
}

// A host that closes its side early and reads late keeps the channel's
// slot until it reads or stops: the peer's bytes waiting in it count
// within MaxChannels, and Open says why it refuses.
func TestClosedUnreadChannelsStayCounted(t *testing.T) {
	cfg := smallConfig()
	host, agent := pair(t, cfg)
	bound := 2 * cfg.MaxChannels * cfg.Window
	opened := 0
	var mine []*Channel // forgotten or not, what they hold counts
	defer func() {
		total := 0
		for _, ch := range mine {
			ch.mu.Lock()
			total += ch.size
			ch.mu.Unlock()
		}
		if total > bound {
			t.Errorf("the host's channels buffer %d bytes, more than 2*MaxChannels*Window = %d", total, bound)
		}
	}()
	within(t, "the close-early cycles", func() {
		for cycle := range 30 {
			ch, err := host.Open()
			if err != nil {
				if !strings.Contains(err.Error(), "wait for the peer") && !strings.Contains(err.Error(), "most one end may have") {
					t.Errorf("cycle %d: open refused with %v, want the channel bound named", cycle, err)
				}
				break
			}
			opened++
			mine = append(mine, ch)
			if err := ch.CloseWrite(); err != nil {
				t.Fatalf("cycle %d: %v", cycle, err)
			}
			in := accept(t, agent)
			if _, err := in.Write(make([]byte, cfg.Window)); err != nil {
				t.Fatalf("cycle %d: peer write: %v", cycle, err)
			}
			if err := in.Close(); err != nil {
				t.Fatalf("cycle %d: peer close: %v", cycle, err)
			}
		}
	})
	if opened > cfg.MaxChannels {
		t.Errorf("opened %d channels nobody read, want at most MaxChannels = %d", opened, cfg.MaxChannels)
	}
}

// The peer's CloseRead fails our pending and later Writes with
// ErrStopped, and closing both sides then frees the slot at both ends.
func TestStopFailsThePeersWrites(t *testing.T) {
	host, agent := pair(t, smallConfig())
	ch, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	in := accept(t, agent)
	in.CloseRead()
	within(t, "the write to a stopped reader", func() {
		for range 1000 {
			if _, err := ch.Write([]byte("x")); err != nil {
				if !errors.Is(err, ErrStopped) {
					t.Errorf("write after the peer's stop: %v, want ErrStopped", err)
				}
				return
			}
			time.Sleep(time.Millisecond)
		}
		t.Error("writes to a stopped reader never failed")
	})
	if err := in.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	within(t, "the host's EOF", func() {
		if _, err := io.ReadAll(ch); err != nil {
			t.Errorf("host read: %v", err)
		}
	})
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
	waitFreed(t, host)
	waitFreed(t, agent)
}

// A Write whose deadline has passed sends nothing even with credit, and
// its wait for the stream's write lock ends at the deadline.
func TestWriteDeadlineBoundsEveryWait(t *testing.T) {
	host, agent := pair(t, smallConfig())
	ch, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	accept(t, agent)
	ch.SetWriteDeadline(time.Now().Add(-time.Second))
	if n, err := ch.Write([]byte("x")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write past its deadline: %d, %v; want 0 and os.ErrDeadlineExceeded", n, err)
	}
	within(t, "a write waiting for the stream", func() {
		if err := host.lock(time.Time{}); err != nil { // as a frame stuck on the stream
			t.Fatal(err)
		}
		defer host.unlock()
		ch.SetWriteDeadline(time.Now().Add(20 * time.Millisecond))
		if n, err := ch.Write([]byte("x")); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Errorf("write behind a stuck frame: %d, %v; want 0 and os.ErrDeadlineExceeded", n, err)
		}
	})
	ch.mu.Lock()
	credit := ch.credit
	ch.mu.Unlock()
	if credit != smallConfig().Window {
		t.Errorf("credit after the failed writes: %d, want the whole window %d back", credit, smallConfig().Window)
	}
}

// CloseWrite ends a Write waiting for credit with ErrClosed.
func TestCloseWriteInterruptsAWriteWaitingForCredit(t *testing.T) {
	cfg := smallConfig()
	host, agent := pair(t, cfg)
	ch, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	accept(t, agent)
	errs := make(chan error, 1)
	go func() { _, err := ch.Write(make([]byte, 2*cfg.Window)); errs <- err }()
	waitWaiters(t, ch, 1)
	within(t, "CloseWrite beside a waiting write", func() {
		if err := ch.CloseWrite(); err != nil {
			t.Errorf("CloseWrite: %v", err)
		}
		if err := <-errs; !errors.Is(err, ErrClosed) {
			t.Errorf("the waiting write got %v, want ErrClosed", err)
		}
	})
}

// waitWaiters waits, bounded, until n Reads or Writes wait on ch.
func waitWaiters(t *testing.T, ch *Channel, n int) {
	t.Helper()
	for range 4000 {
		ch.mu.Lock()
		w := ch.waiting
		ch.mu.Unlock()
		if w >= n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never saw %d waiters on channel %d", n, ch.id)
}

// A credit for a channel freed at both ends is a breach, not dropped:
// an honest end sends none after its stop, and dropping it let a peer
// loop credit frames at a core's worth of the reader's time for free.
func TestCreditForAFreedChannelIsABreach(t *testing.T) {
	host, agent := pair(t, smallConfig())
	ch, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	in := accept(t, agent)
	within(t, "closing both ways", func() {
		errs := make(chan error, 1)
		go func() { errs <- in.Close() }()
		if err := errors.Join(ch.Close(), <-errs); err != nil {
			t.Error(err)
		}
	})
	waitFreed(t, host)
	waitFreed(t, agent)
	if err := agent.write(header{typ: frameCredit, id: ch.ID(), n: 1}, nil, time.Time{}); err != nil {
		t.Fatal(err)
	}
	within(t, "the host's end of the stream", func() { <-host.Done() })
	if err := host.Err(); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "credit frame for channel 1, which is not open") {
		t.Errorf("got %v, want ErrProtocol saying credit frame for channel 1, which is not open", err)
	}
}

// Ends configured apart end the stream at once with one line naming both
// configs.
func TestConfigMismatchIsNamed(t *testing.T) {
	a, b := net.Pipe()
	other := smallConfig()
	other.Window *= 2
	host, err := New(a, smallConfig(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	agent, err := New(b, other, false)
	if err != nil {
		t.Fatal(err)
	}
	defer agent.Close()
	within(t, "the mismatched streams' end", func() { <-host.Done(); <-agent.Done() })
	// The first to read the other's hello ends the stream; the other may
	// see that end first.
	named := 0
	for _, m := range []*Mux{host, agent} {
		if err := m.Err(); errors.Is(err, ErrMismatch) && strings.Contains(err.Error(), "128") {
			named++
		}
	}
	if named == 0 {
		t.Errorf("neither end named the mismatch: %v; %v", host.Err(), agent.Err())
	}
}

func TestEmptyReadReturnsAtOnce(t *testing.T) {
	host, agent := pair(t, smallConfig())
	ch, err := host.Open()
	if err != nil {
		t.Fatal(err)
	}
	accept(t, agent)
	within(t, "an empty read", func() {
		if n, err := ch.Read(nil); n != 0 || err != nil {
			t.Errorf("Read(nil): %d, %v; want 0, nil", n, err)
		}
	})
}

// A full window takes a buffer of one window, also once part was read
// and the peer refilled it: a growing buffer would reach twice that.
func TestFullWindowTakesOneWindowOfMemory(t *testing.T) {
	cfg := Config{Window: 4096, MaxChannels: 1, MaxPayload: 1000, WriteTimeout: testWait}
	host, agent := pair(t, cfg)
	ch := open(t, host)
	in := accept(t, agent)
	within(t, "filling the window, reading a quarter and filling it again", func() {
		if _, err := ch.Write(make([]byte, cfg.Window)); err != nil {
			t.Error(err)
		}
		if _, err := io.ReadFull(in, make([]byte, cfg.Window/4)); err != nil {
			t.Error(err)
		}
		if _, err := ch.Write(make([]byte, cfg.Window/4)); err != nil {
			t.Error(err)
		}
	})
	for range 4000 { // the last frame may still be on its way
		in.mu.Lock()
		size, capacity := in.size, cap(in.buf)
		in.mu.Unlock()
		if size == cfg.Window {
			if capacity != cfg.Window {
				t.Errorf("a full window of %d bytes takes %d", cfg.Window, capacity)
			}
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the window never filled")
}

// A channel read to its end after the peer's close lets go of its ring,
// so a drained channel still referenced holds no window.
func TestDrainedChannelFreesItsRing(t *testing.T) {
	host, agent := pair(t, smallConfig())
	ch := open(t, host)
	in := accept(t, agent)
	within(t, "the exchange", func() {
		if _, err := in.Write([]byte("abc")); err != nil {
			t.Error(err)
		}
		if err := in.CloseWrite(); err != nil {
			t.Error(err)
		}
		if got, err := io.ReadAll(ch); err != nil || string(got) != "abc" {
			t.Errorf("read %q, %v; want abc", got, err)
		}
	})
	ch.mu.Lock()
	defer ch.mu.Unlock()
	if ch.buf != nil {
		t.Errorf("a drained channel keeps a ring of %d bytes", cap(ch.buf))
	}
}

// WaitSlots returns once the peer frees one of our slots; until then
// Slots counts the channel we closed as held by the peer.
func TestWaitSlotsWaitsForThePeersClose(t *testing.T) {
	host, agent := pair(t, smallConfig())
	var chans []*Channel
	for range smallConfig().MaxChannels {
		chans = append(chans, open(t, host))
	}
	in := accept(t, agent)
	if err := host.WaitSlots(1, time.Now()); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("WaitSlots on a full stream = %v, want os.ErrDeadlineExceeded", err)
	}
	if err := chans[0].Close(); err != nil {
		t.Fatal(err)
	}
	within(t, "our close and stop", func() {
		for range 4000 {
			if _, waiting := host.Slots(); waiting == 1 {
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	})
	if free, waiting := host.Slots(); free != 0 || waiting != 1 {
		t.Fatalf("Slots() = %d free, %d waiting; want 0, 1", free, waiting)
	}
	// OwedFor counts it from our close on: not yet for an hour, already
	// for no time at all.
	if got := host.OwedFor(time.Hour); got != 0 {
		t.Errorf("OwedFor(1h) just after our close = %d, want 0", got)
	}
	if got := host.OwedFor(0); got != 1 {
		t.Errorf("OwedFor(0) = %d, want 1", got)
	}
	waited := make(chan error, 1)
	go func() { waited <- host.WaitSlots(1, time.Now().Add(testWait)) }()
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, "WaitSlots", func() {
		if err := <-waited; err != nil {
			t.Errorf("WaitSlots after the peer's close = %v", err)
		}
	})
	if free, waiting := host.Slots(); free != 1 || waiting != 0 {
		t.Errorf("Slots() = %d free, %d waiting; want 1, 0", free, waiting)
	}
	if got := host.OwedFor(0); got != 0 {
		t.Errorf("OwedFor(0) after the peer's close = %d, want 0", got)
	}
}

func TestWaitSlotsEndsWithTheStream(t *testing.T) {
	host, _ := pair(t, smallConfig())
	for range smallConfig().MaxChannels {
		open(t, host)
	}
	waited := make(chan error, 1)
	go func() { waited <- host.WaitSlots(1, time.Time{}) }()
	if err := host.Close(); err != nil {
		t.Fatal(err)
	}
	within(t, "WaitSlots", func() {
		if err := <-waited; !errors.Is(err, ErrClosed) {
			t.Errorf("WaitSlots on a closed stream = %v, want ErrClosed", err)
		}
	})
}
