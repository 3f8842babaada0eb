package e2e

import (
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
)

// egressRounds is how many fresh sessions per backend
// TestEgressFirstRequestTime times; 0, the default, skips it (a
// measurement, not a check every e2e run should pay for).
var egressRounds = flag.Int("egress-rounds", 0, "rounds of TestEgressFirstRequestTime, each a fresh session on gvisor and on microvm (0 skips it)")

// timedBackends are the backends TestEgressFirstRequestTime compares:
// gVisor's bridge relays each connection over a unix socket of its own,
// microvm's over a channel of the agent stream.
var timedBackends = []string{"gvisor", "microvm"}

// TestEgressFirstRequestTime logs what a fresh session's first HTTPS
// request, a second one, and then its first plain HTTP one took through
// the proxy, by curl's own clock inside the box, on gVisor and microvm in
// turns in the same run, and microvm's medians over gVisor's. It runs
// only with -egress-rounds above 0 and both backends selected (-backend,
// WARDEN_BACKENDS), and asserts only that the requests arrive (no timed
// assertion: the host is noisy).
func TestEgressFirstRequestTime(t *testing.T) {
	if *egressRounds <= 0 {
		t.Skip("a measurement: run it with -egress-rounds N")
	}
	selected := conformanceBackends(t)
	for _, b := range timedBackends {
		if !slices.Contains(selected, b) {
			t.Skipf("compares %v, but the selected backends are %v", timedBackends, selected)
		}
	}
	n := startInternet(t)
	ca, err := os.ReadFile(filepath.Join(n.workspace, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	servers := map[string]*apiServer{}
	for _, b := range timedBackends {
		requireBackend(t, b)
		servers[b] = startServer(t, backendArgs(b)...)
	}
	times := map[string][]curlTimes{}
	for round := range *egressRounds {
		for _, b := range timedBackends {
			got := firstRequests(t, servers[b], n, ca)
			for i, kind := range requestKinds {
				t.Logf("round %d %s %s: %s", round, b, kind, got[i])
				times[b+" "+kind] = append(times[b+" "+kind], got[i])
			}
		}
	}
	for _, kind := range requestKinds {
		g, m := medians(times["gvisor "+kind]), medians(times["microvm "+kind])
		t.Logf("%s request, medians of %d: gvisor %s; microvm %s; total ratio %.2fx", kind, *egressRounds, g, m, m.total/g.total)
	}
}

// requestKinds name what firstRequests times, in its order.
var requestKinds = []string{"first https", "second https", "first http"}

// curlTimes are curl's own phase times of one request, in seconds from
// its start. Through the proxy, connect is the TCP connect to the box's
// bridge on its own lo; appconnect (HTTPS only, else 0) ends the CONNECT
// through the bridge and proxy and then the TLS handshake; total ends the
// response. So appconnect-connect of an HTTPS request is the CONNECT and
// the TLS handshake, and total-appconnect one request and response
// through the open tunnel, with no handshake in it.
type curlTimes struct{ connect, appconnect, total float64 }

// String gives the times in milliseconds, with the tunnel's request apart.
func (c curlTimes) String() string {
	s := fmt.Sprintf("connect %.1f ms, total %.1f ms", c.connect*1000, c.total*1000)
	if c.appconnect > 0 {
		s += fmt.Sprintf(", appconnect %.1f ms (CONNECT+TLS %.1f ms), request through the tunnel %.1f ms", c.appconnect*1000, (c.appconnect-c.connect)*1000, (c.total-c.appconnect)*1000)
	}
	return s
}

// firstRequests makes a session with the proxy on srv, gives it the
// stand-in's CA, and returns curl's times of its first HTTPS request, a
// second one (curl and the guest's caches warm) and its first HTTP
// request.
func firstRequests(t *testing.T, srv *apiServer, n *internet, ca []byte) []curlTimes {
	t.Helper()
	hp, tp := strconv.Itoa(n.httpPort), strconv.Itoa(n.tlsPort)
	id := srv.newSession(t, keyA, map[string]any{"network": map[string]any{"mode": "proxy", "allow": []string{"allowed.test:" + hp, "allowed.test:" + tp}}})
	defer func() {
		if code, b := srv.call(t, keyA, "DELETE", sessionPath(id), nil, ""); code != http.StatusNoContent {
			t.Errorf("DELETE %s = %d %s, want 204", id, code, b)
		}
	}()
	if code, b := srv.call(t, keyA, http.MethodPut, sessionPath(id, "/files?path=ca.pem"), strings.NewReader(string(ca)), "application/octet-stream"); code != http.StatusOK && code != http.StatusCreated {
		t.Fatalf("uploading ca.pem = %d %s", code, b)
	}
	secure := "https://allowed.test:" + tp + "/t"
	return []curlTimes{curlTime(t, srv, id, secure), curlTime(t, srv, id, secure), curlTime(t, srv, id, "http://allowed.test:"+hp+"/t")}
}

// curlTime fetches url in session id and returns curl's phase times.
func curlTime(t *testing.T, srv *apiServer, id, url string) curlTimes {
	t.Helper()
	cmd := map[string]any{"command": []string{"curl", "-sS", "--cacert", "ca.pem", "-o", "/dev/null", "-w", "%{http_code} %{time_connect} %{time_appconnect} %{time_total}", url}}
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), cmd, http.StatusOK, &r)
	f := strings.Fields(r.Stdout)
	if len(f) != 4 || f[0] != "200" {
		t.Fatalf("curl %s = %q (stderr %q), want 200 and three times", url, r.Stdout, r.Stderr)
	}
	var secs [3]float64
	for i, v := range f[1:] {
		x, err := strconv.ParseFloat(v, 64)
		if err != nil {
			t.Fatalf("curl %s: time %q: %v", url, v, err)
		}
		secs[i] = x
	}
	return curlTimes{secs[0], secs[1], secs[2]}
}

// medians are the median of each of cs's phases apart.
func medians(cs []curlTimes) curlTimes {
	var c, a, tot []float64
	for _, x := range cs {
		c, a, tot = append(c, x.connect), append(a, x.appconnect), append(tot, x.total)
	}
	return curlTimes{median(c), median(a), median(tot)}
}

// median is the middle of xs (the mean of the two middle ones for an
// even count).
func median(xs []float64) float64 {
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
