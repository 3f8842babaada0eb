package e2e

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// The stand-in internet lives in a network namespace of its own, joined to
// the host by a veth pair and reached at 3ffe:b00::7: a global unicast
// address the proxy must count as public, from the 6bone block returned
// in 2006 and routed nowhere since, and not an address of this host (the
// proxy refuses the host's own addresses). Its web servers are this test
// binary, started there with inetEnv set.

const inetEnv = "WARDEN_E2E_INET"

// serveInternet is the test binary's other life: HTTP and HTTPS servers on
// internetIP, ports printed on stdout, until stdin closes.
func serveInternet() {
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			w.Header().Set("Content-Length", "104857600")
			buf := make([]byte, 1<<20)
			for range 100 {
				if _, err := w.Write(buf); err != nil {
					return
				}
			}
			return
		}
		fmt.Fprintf(w, "hello from the internet, %s", r.URL.Path)
	})
	plain, err := net.Listen("tcp", net.JoinHostPort(internetIP, "0"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	cert, err := tls.LoadX509KeyPair(os.Getenv(inetEnv+"_CERT"), os.Getenv(inetEnv+"_KEY"))
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	secure, err := tls.Listen("tcp", net.JoinHostPort(internetIP, "0"), &tls.Config{Certificates: []tls.Certificate{cert}})
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	go func() { _ = http.Serve(plain, handler) }()
	go func() { _ = http.Serve(secure, handler) }()
	fmt.Printf("http=%d https=%d\n", port(plain), port(secure))
	_, _ = io.Copy(io.Discard, os.Stdin)
}

// startInternet builds the namespace, starts the servers in it and tears
// everything down when the test ends.
func startInternet(t *testing.T) *internet {
	t.Helper()
	requireSandbox(t)
	ns := "wde-" + randomSuffix(t)[:6]
	host, peer := ns+"h", ns+"n"
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	// A link network of its own per test: a namespace is torn down
	// asynchronously, and the last test's veth may linger a moment.
	link := "3ffe:b00:" + randomSuffix(t)[:4] + "::"
	run("netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run("link", "add", host, "type", "veth", "peer", "name", peer, "netns", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "link", "del", host).Run() })
	run("link", "set", host, "up")
	run("-n", ns, "link", "set", peer, "up")
	run("-n", ns, "link", "set", "lo", "up")
	run("addr", "add", link+"1/64", "dev", host, "nodad")
	run("-n", ns, "addr", "add", link+"2/64", "dev", peer, "nodad")
	run("-n", ns, "addr", "add", internetIP+"/128", "dev", "lo", "nodad")
	run("-6", "route", "replace", internetIP+"/128", "via", link+"2", "dev", host)
	t.Cleanup(func() { _ = exec.Command("ip", "-6", "route", "del", internetIP+"/128", "dev", host).Run() })

	ws := hostWorkspace(t, t.TempDir())
	certFile, keyFile := writeCert(t, ws)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("ip", "netns", "exec", ns, self)
	cmd.Env = append(os.Environ(), inetEnv+"=1", inetEnv+"_CERT="+certFile, inetEnv+"_KEY="+keyFile)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	n := &internet{workspace: ws}
	line := make(chan string, 1)
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			line <- s.Text()
		}
		close(line)
	}()
	select {
	case l := <-line:
		if _, err := fmt.Sscanf(l, "http=%d https=%d", &n.httpPort, &n.tlsPort); err != nil {
			t.Fatalf("the stand-in internet said %q", l)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the stand-in internet did not start within 20s")
	}
	t.Setenv("WARDEN_EGRESS_HOSTS", "allowed.test="+internetIP+",other.test="+internetIP+
		",rebind.test="+internetIP+",rebind.test=127.0.0.1,local.test=127.0.0.1,example.com="+internetIP)
	return n
}

// writeCert makes a self-signed certificate for the stand-in's names; the
// sandbox trusts it through ca.pem in its workspace.
func writeCert(t *testing.T, ws string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "warden e2e"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		DNSNames: []string{"allowed.test", "other.test", "example.com"}, IPAddresses: []net.IP{net.ParseIP(internetIP)},
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = dir+"/cert.pem", dir+"/key.pem"
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	for path, b := range map[string][]byte{
		certFile: certPEM, ws + "/ca.pem": certPEM,
		keyFile: pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	} {
		if err := os.WriteFile(path, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
