package streammux

import (
	"context"
	"io"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// socketPair is a connected pair of stream sockets, as a VM's serial port
// or a pod's TCP connection would carry the stream.
func socketPair(b *testing.B) (net.Conn, net.Conn) {
	b.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	var conns [2]net.Conn
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "stream")
		if conns[i], err = net.FileConn(f); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
	return conns[0], conns[1]
}

// channelPair is one channel of a Mux pair over a socket pair.
func channelPair(b *testing.B) (*Channel, *Channel) {
	b.Helper()
	c0, c1 := socketPair(b)
	host, err := New(c0, DefaultConfig(), true)
	if err != nil {
		b.Fatal(err)
	}
	agent, err := New(c1, DefaultConfig(), false)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { host.Close(); agent.Close() })
	ch, err := host.Open()
	if err != nil {
		b.Fatal(err)
	}
	in, err := agent.Accept(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	return ch, in
}

// bulk sends b.N 64 KiB writes from w to r, read back into one reused
// buffer; the timer starts after the setup.
func bulk(b *testing.B, w io.Writer, r io.Reader) {
	buf := make([]byte, 64<<10)
	in := make([]byte, len(buf))
	b.SetBytes(int64(len(buf)))
	errs := make(chan error, 1)
	b.ResetTimer()
	go func() {
		var err error
		for i := 0; i < b.N && err == nil; i++ {
			_, err = w.Write(buf)
		}
		errs <- err
	}()
	for left := b.N * len(buf); left > 0; {
		n, err := r.Read(in[:min(left, len(in))])
		if err != nil {
			b.Fatal(err)
		}
		left -= n
	}
	if err := <-errs; err != nil {
		b.Fatal(err)
	}
}

// roundTrips echoes one byte b.N times between a and the echoer at z.
func roundTrips(b *testing.B, a io.ReadWriter, z io.ReadWriter) {
	go func() {
		p := make([]byte, 1)
		for {
			if _, err := io.ReadFull(z, p); err != nil {
				return
			}
			if _, err := z.Write(p); err != nil {
				return
			}
		}
	}()
	p := make([]byte, 1)
	b.ResetTimer()
	for range b.N {
		if _, err := a.Write(p); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(a, p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkBulkPipe is the fd-passing path's stdout: a pipe.
func BenchmarkBulkPipe(b *testing.B) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	bulk(b, w, r)
}

// BenchmarkBulkChannel is a stdout relayed on one channel.
func BenchmarkBulkChannel(b *testing.B) {
	w, r := channelPair(b)
	bulk(b, w, r)
}

// BenchmarkRoundTripSocket is a request and its answer on a bare socket,
// as the control connection carries them today.
func BenchmarkRoundTripSocket(b *testing.B) {
	a, z := socketPair(b)
	defer a.Close()
	defer z.Close()
	roundTrips(b, a, z)
}

// BenchmarkRoundTripChannel is the same on a channel.
func BenchmarkRoundTripChannel(b *testing.B) {
	a, z := channelPair(b)
	roundTrips(b, a, z)
}
