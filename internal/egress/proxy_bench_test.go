package egress

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"
)

const benchSize = 100 << 20

// BenchmarkThroughput downloads 100 MiB from a TCP server on testPublic
// directly and through a CONNECT tunnel, in the same run, and reports
// both rates and their ratio (the target is at least 0.8).
func BenchmarkThroughput(b *testing.B) {
	internet(b)
	ln, err := net.Listen("tcp", net.JoinHostPort(testPublic.String(), "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	go serveZeros(ln)
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	pol := mustPolicy(b, []string{"allowed.test:" + port}, nil)
	pol.MaxBytes = 1 << 50
	_, a := attach(b, Config{Hosts: testHosts}, pol)
	buf := make([]byte, 256<<10)

	var direct, proxied time.Duration
	b.SetBytes(2 * benchSize)
	b.ResetTimer()
	for b.Loop() {
		start := time.Now()
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			b.Fatal(err)
		}
		drain(b, c, buf)
		direct += time.Since(start)

		start = time.Now()
		c, err = net.Dial("unix", a.SocketPath())
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.WriteString(c, "CONNECT allowed.test:"+port+" HTTP/1.1\r\n\r\n")
		br := bufio.NewReaderSize(c, 256<<10)
		resp, err := http.ReadResponse(br, &http.Request{Method: "CONNECT"})
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("CONNECT: %v %v", resp, err)
		}
		drain(b, struct {
			io.Reader
			io.Closer
		}{br, c}, buf)
		proxied += time.Since(start)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * benchSize / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(direct), "direct-MB/s")
	b.ReportMetric(mbps(proxied), "proxy-MB/s")
	b.ReportMetric(mbps(proxied)/mbps(direct), "ratio")
}

// serveZeros writes benchSize bytes to each connection.
func serveZeros(ln net.Listener) {
	buf := make([]byte, 1<<20)
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			for sent := 0; sent < benchSize; sent += len(buf) {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}()
	}
}

func drain(b *testing.B, c io.ReadCloser, buf []byte) {
	defer c.Close()
	n, err := io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, buf)
	if err != nil || n != benchSize {
		b.Fatalf("read %d bytes, %v; want %d", n, err, benchSize)
	}
}
