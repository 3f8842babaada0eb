package e2e

import (
	"flag"
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
// TestEgressFirstRequestTime times.
var egressRounds = flag.Int("egress-rounds", 1, "rounds of TestEgressFirstRequestTime (each a fresh session on gvisor and on microvm)")

// timedBackends are the backends TestEgressFirstRequestTime compares:
// gVisor's bridge relays each connection over a unix socket of its own,
// microvm's over a channel of the agent stream.
var timedBackends = []string{"gvisor", "microvm"}

// TestEgressFirstRequestTime logs what a fresh session's first HTTPS
// request, a second one, and then its first plain HTTP one took through
// the proxy, by
// curl's own clock inside the box, on gVisor and microvm in turns in the
// same run, and microvm's median over gVisor's. It asserts only that the
// requests arrive (no timed assertion: the host is noisy).
func TestEgressFirstRequestTime(t *testing.T) {
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
	times := map[string][]float64{}
	for round := range *egressRounds {
		for _, b := range timedBackends {
			got := firstRequests(t, servers[b], n, ca)
			t.Logf("round %d %s: first https %.1f ms, second https %.1f ms, first http %.1f ms", round, b, got[0]*1000, got[1]*1000, got[2]*1000)
			for i, kind := range requestKinds {
				times[b+" "+kind] = append(times[b+" "+kind], got[i])
			}
		}
	}
	for _, kind := range requestKinds {
		g, m := median(times["gvisor "+kind]), median(times["microvm "+kind])
		t.Logf("%s request, median of %d: gvisor %.1f ms, microvm %.1f ms, ratio %.2fx", kind, *egressRounds, g*1000, m*1000, m/g)
	}
}

// requestKinds name what firstRequests times, in its order.
var requestKinds = []string{"first https", "second https", "first http"}

// firstRequests makes a session with the proxy on srv, gives it the
// stand-in's CA, and returns the seconds its first HTTPS request, a
// second one (curl and the guest's caches warm) and its first HTTP
// request took, by curl.
func firstRequests(t *testing.T, srv *apiServer, n *internet, ca []byte) []float64 {
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
	return []float64{curlTime(t, srv, id, secure), curlTime(t, srv, id, secure), curlTime(t, srv, id, "http://allowed.test:"+hp+"/t")}
}

// curlTime fetches url in session id and returns curl's time_total.
func curlTime(t *testing.T, srv *apiServer, id, url string) float64 {
	t.Helper()
	cmd := map[string]any{"command": []string{"curl", "-sS", "--cacert", "ca.pem", "-o", "/dev/null", "-w", "%{http_code} %{time_total}", url}}
	var r spec.Result
	srv.jsonCall(t, keyA, "POST", sessionPath(id, "/exec"), cmd, http.StatusOK, &r)
	code, secs, _ := strings.Cut(r.Stdout, " ")
	f, err := strconv.ParseFloat(secs, 64)
	if code != "200" || err != nil {
		t.Fatalf("curl %s = %q (stderr %q), want 200 and a time", url, r.Stdout, r.Stderr)
	}
	return f
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
