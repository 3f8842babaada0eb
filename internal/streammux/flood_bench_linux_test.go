package streammux

import (
	"bufio"
	"context"
	"io"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// BenchmarkSmallFrameFlood measures what a peer packing 1-byte data
// frames into 64 KiB writes (within the credit it is given, so no
// breach) costs this process, with the reader unpaced (ReadRate 0, as
// before pacing) and paced (DefaultConfig). Each op is floodFor of
// flood; cpu-ms/s is this process's CPU a second of it (the flooder's
// few large writes included, the reader's per-frame work dominating),
// frames/s what the channel's reader got.
func BenchmarkSmallFrameFlood(b *testing.B) {
	const floodFor = 200 * time.Millisecond
	for _, tc := range []struct {
		name string
		rate int
	}{{"unpaced", 0}, {"paced", DefaultConfig().ReadRate}} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := DefaultConfig()
			cfg.ReadRate = tc.rate
			var cpu, wall time.Duration
			var frames int64
			for range b.N {
				c, f, w := flood(b, cfg, floodFor)
				cpu, wall, frames = cpu+c, wall+w, frames+f
			}
			b.ReportMetric(float64(cpu.Milliseconds())/wall.Seconds(), "cpu-ms/s")
			b.ReportMetric(float64(frames)/wall.Seconds(), "frames/s")
		})
	}
}

// flood runs one flood for d and returns the CPU this process used, the
// frames the channel's reader got and the wall time.
func flood(b *testing.B, cfg Config, d time.Duration) (time.Duration, int64, time.Duration) {
	b.Helper()
	c0, c1 := socketPair(b)
	m, err := New(c0, cfg, false)
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	var got atomic.Int64
	go func() {
		ch, err := m.Accept(context.Background())
		if err != nil {
			return
		}
		buf := make([]byte, 32<<10)
		for {
			n, err := ch.Read(buf)
			got.Add(int64(n))
			if err != nil {
				return
			}
		}
	}()
	credit := make(chan int, 64)
	go readCredit(c1, credit)
	start, cpu0 := time.Now(), rusageCPU(b)
	floodFrames(c1, cfg, credit, start.Add(d))
	wall, cpu, frames := time.Since(start), rusageCPU(b)-cpu0, got.Load()
	c1.Close()
	<-m.Done()
	return cpu, frames, wall
}

// floodFrames writes the hello, opens channel 1 and packs 1-byte data
// frames into 64 KiB writes, never past the credit given, until by.
func floodFrames(c net.Conn, cfg Config, credit <-chan int, by time.Time) {
	if _, err := c.Write(cat(frame(frameHello, version, helloLen, hello(cfg)), frame(frameOpen, 1, 0, nil))); err != nil {
		return
	}
	one := frame(frameData, 1, 1, []byte{'x'})
	buf := make([]byte, 0, 64<<10)
	have := cfg.Window
	for time.Now().Before(by) {
		for have == 0 {
			select {
			case n := <-credit:
				have += n
			case <-time.After(time.Until(by)):
				return
			}
		}
		buf = buf[:0]
		for ; have > 0 && len(buf)+len(one) <= cap(buf); have-- {
			buf = append(buf, one...)
		}
		if _, err := c.Write(buf); err != nil {
			return
		}
		for len(credit) > 0 {
			have += <-credit
		}
	}
}

// readCredit passes on the credit the mux gives for channel 1.
func readCredit(c net.Conn, credit chan<- int) {
	r := bufio.NewReader(c)
	var hb [headerLen]byte
	payload := make([]byte, helloLen)
	for {
		if _, err := io.ReadFull(r, hb[:]); err != nil {
			return
		}
		h, err := parseHeader(hb[:], 1<<20)
		if err != nil {
			return
		}
		switch h.typ {
		case frameHello:
			if _, err := io.ReadFull(r, payload); err != nil {
				return
			}
		case frameCredit:
			credit <- int(h.n)
		}
	}
}

// rusageCPU is the CPU time this process has used.
func rusageCPU(b *testing.B) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
