// Command egress measures what the egress path costs a download: 100 MiB
// fetched with curl from a server in a network namespace of its own,
// directly from the host and from a sandbox through --net proxy (the
// sandbox's bridge, the unix socket, the proxy), interleaved round by
// round, reporting curl's own transfer speed (so sandbox start-up is not
// counted) and the ratio of the medians.
//
//	go run ./bench/egress -warden bin/warden -n 10   (as root)
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// serverIP is the stand-in server's address: global unicast from the
// 6bone block returned in 2006, routed nowhere, so the proxy counts it as
// public while the traffic never leaves this host.
const serverIP = "3ffe:b00::7"

const serveEnv = "WARDEN_BENCH_SERVE"

func main() {
	if os.Getenv(serveEnv) == "1" {
		serve()
		return
	}
	wardenBin := flag.String("warden", "bin/warden", "warden binary to measure")
	n := flag.Int("n", 10, "measured rounds")
	flag.Parse()
	if err := bench(*wardenBin, *n); err != nil {
		fmt.Fprintln(os.Stderr, "egress:", err)
		os.Exit(1)
	}
}

// serve sends 100 MiB for every request, then exits when stdin closes.
func serve() {
	ln, err := net.Listen("tcp", net.JoinHostPort(serverIP, "0"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	buf := make([]byte, 1<<20)
	go func() {
		// It serves until the process exits, which ends it.
		_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", strconv.Itoa(100<<20))
			for range 100 {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
		}))
	}()
	fmt.Println(ln.Addr().(*net.TCPAddr).Port)
	_, _ = bufio.NewReader(os.Stdin).ReadString(0) // any end of stdin, EOF included, is the signal to stop
}

func bench(wardenBin string, n int) error {
	port, stop, err := startServer()
	defer stop()
	if err != nil {
		return err
	}
	url := "http://allowed.test:" + port + "/big"
	curl := []string{"curl", "-s", "-o", "/dev/null", "-w", "%{speed_download}"}
	tunnel := append(append([]string{}, curl[:1]...), append([]string{"--proxytunnel"}, curl[1:]...)...)
	direct := append(append([]string{}, curl...), "http://["+serverIP+"]:"+port+"/big")
	sandboxed := func(c []string) []string {
		return append(append([]string{wardenBin, "run", "--net", "proxy", "--allow", "allowed.test:" + port,
			"--timeout", "60s", "--"}, c...), url)
	}
	paths := []struct {
		name string
		argv []string
	}{
		{"curl on the host, direct", direct},
		{"curl in a sandbox, --net proxy, CONNECT tunnel (as for https)", sandboxed(tunnel)},
		{"curl in a sandbox, --net proxy, plain-HTTP forwarding", sandboxed(curl)},
	}
	speeds := make([][]float64, len(paths))
	for round := range n + 1 {
		for i, p := range paths {
			s, err := speed(p.argv)
			if err != nil {
				return fmt.Errorf("%s: %w", p.name, err)
			}
			if round > 0 { // the first round warms caches
				speeds[i] = append(speeds[i], s)
			}
		}
	}
	base := median(speeds[0])
	fmt.Println("| path | median MB/s | ratio to direct |")
	fmt.Println("|---|---:|---:|")
	for i, p := range paths {
		m := median(speeds[i])
		fmt.Printf("| %s | %.0f | %.2fx |\n", p.name, m/1e6, m/base)
	}
	fmt.Printf("\n%d rounds, interleaved, 100 MiB each\n", n)
	return nil
}

// speed runs argv and parses curl's bytes per second.
func speed(argv []string) (float64, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), "WARDEN_EGRESS_HOSTS=allowed.test="+serverIP)
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%w: %s", err, out)
	}
	return strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// startServer builds a namespace joined by a veth pair, routes serverIP
// into it and starts this binary there as the server.
func startServer() (port string, stop func(), err error) {
	b := make([]byte, 3)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (it panics instead)
	suffix := hex.EncodeToString(b)
	ns, host, peer, link := "wdb-"+suffix, "wdb"+suffix+"h", "wdb"+suffix+"n", "3ffe:b00:"+suffix[:4]+"::"
	var undo []func()
	stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	ip := func(args ...string) error {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, out)
		}
		return nil
	}
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns},
		{"link", "set", host, "up"},
		{"-n", ns, "link", "set", peer, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
		{"addr", "add", link + "1/64", "dev", host, "nodad"},
		{"-n", ns, "addr", "add", link + "2/64", "dev", peer, "nodad"},
		{"-n", ns, "addr", "add", serverIP + "/128", "dev", "lo", "nodad"},
		{"-6", "route", "replace", serverIP + "/128", "via", link + "2", "dev", host},
	}
	undo = append(undo, func() { warnUndo(ip("netns", "del", ns)) }, func() { warnUndo(ip("link", "del", host)) })
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return "", stop, err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return "", stop, err
	}
	cmd := exec.Command("ip", "netns", "exec", ns, self)
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		return "", stop, err
	}
	undo = append(undo, func() { stdin.Close(); _ = cmd.Wait() }) // the server is killed by its end of stdin: its status says nothing
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return "", stop, fmt.Errorf("starting the server: %w", err)
	}
	return strings.TrimSpace(line), stop, nil
}

// warnUndo reports a namespace or link the bench could not remove, which
// stays on the host until removed by hand (ip netns del, ip link del).
func warnUndo(err error) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "egress bench: cleaning up: %v\n", err)
	}
}
