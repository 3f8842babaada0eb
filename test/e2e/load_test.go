package e2e

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// longLoad selects the long forms of the load and leak tests (50 hostile
// sessions for minutes; 10,000 runs and 2,000 session cycles). CI runs
// the short forms.
var longLoad = flag.Bool("long", false, "run the long forms of the load and leak tests")

// loadFor, when set, overrides how long the hostile load lasts.
var loadFor = flag.Duration("load-for", 0, "how long TestHostileLoad's load lasts (default 15s, 3m with -long)")

// client is a plain API client whose calls return errors, for goroutines.
type client struct {
	url string
	hc  *http.Client
}

func newClient(s *apiServer) *client {
	return &client{url: s.url, hc: &http.Client{Timeout: 2 * time.Minute}}
}

func (c *client) do(method, path, ctype string, body io.Reader) (int, []byte, error) {
	req, err := http.NewRequest(method, c.url+path, body)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+keyA)
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, b, err
}

func (c *client) json(method, path string, in, out any, want int) error {
	b, _ := json.Marshal(in)
	code, body, err := c.do(method, path, "application/json", bytes.NewReader(b))
	if err != nil {
		return err
	}
	if code != want {
		return fmt.Errorf("%s %s = %d %s", method, path, code, body)
	}
	if out != nil {
		return json.Unmarshal(body, out)
	}
	return nil
}

func (c *client) create(limits map[string]any) (string, error) {
	var s struct{ ID string }
	body := map[string]any{}
	if limits != nil {
		body["limits"] = limits
	}
	err := c.json("POST", "/v1/sessions", body, &s, http.StatusCreated)
	return s.ID, err
}

// benignRound is one exec of 1+1 and one 64 KiB file round trip.
func (c *client) benignRound(id string, payload []byte) (time.Duration, error) {
	start := time.Now()
	var r spec.Result
	if err := c.json("POST", "/v1/sessions/"+id+"/exec", map[string]any{"language": "python", "code": "1+1"}, &r, http.StatusOK); err != nil {
		return 0, err
	}
	if r.Value != "2" {
		return 0, fmt.Errorf("1+1 = %q (stderr %q)", r.Value, r.Stderr)
	}
	took := time.Since(start)
	if code, b, err := c.do("PUT", "/v1/sessions/"+id+"/files?path=rt.bin", "application/octet-stream", bytes.NewReader(payload)); err != nil || code >= 300 {
		return 0, fmt.Errorf("upload = %d %s %v", code, b, err) //nolint:errorlint // err may be nil (a bad status alone): %v prints it, %w would not
	}
	code, b, err := c.do("GET", "/v1/sessions/"+id+"/files?path=rt.bin", "", nil)
	if err != nil || code != http.StatusOK || !bytes.Equal(b, payload) {
		return 0, fmt.Errorf("download = %d, %d bytes, %v", code, len(b), err) //nolint:errorlint // err may be nil (a bad status alone): %v prints it, %w would not
	}
	return took, nil
}

// hostileScripts are what the hostile sessions run in turn, each bounded
// by itself and by the session's limits (checked before the bombs run).
var hostileScripts = []string{
	// fork bomb: stops at the pids limit or after 2000 forks.
	"python3 -c '\nimport os, time\nfor i in range(2000):\n try:\n  if os.fork() == 0:\n   time.sleep(1); os._exit(0)\n except OSError:\n  break'",
	// memory bomb: at most 512 MiB, four times the limit.
	"python3 -c 'b = []\nfor _ in range(512): b.append(bytearray(1 << 20))'",
	// CPU spinner, ended by the exec's timeout.
	"while :; do :; done",
	// disk filler: until the tmpfs is full, at most 256 MiB.
	"dd if=/dev/zero of=/workspace/fill bs=1M count=256 2>/dev/null; rm -f /workspace/fill",
	// output flood: 1 GiB, of which the output limit keeps 1 MiB; the rest
	// drains at a pace (50 MiB/s at 0.5 cores), so the exec's timeout ends it.
	"head -c 1073741824 /dev/zero",
}

// hostileLimits bound every hostile session.
var hostileLimits = map[string]any{"memory_bytes": 128 << 20, "pids": 64, "cpus": 0.5, "disk_bytes": 64 << 20, "timeout_seconds": 5}

// TestHostileLoad runs hostile sessions (fork and memory bombs, spinners,
// disk fillers, output floods) against one server while a benign client
// runs 1+1 and file round trips, and reports the benign figures loaded
// against unloaded, /healthz, and the server's memory. It asserts what
// must hold (no benign error, a server that answers and does not grow
// per flood); the timings are reported, not asserted.
func TestHostileLoad(t *testing.T) {
	hostile, dur := 8, 15*time.Second
	if *longLoad {
		hostile, dur = 50, 3*time.Minute
	}
	if *loadFor > 0 {
		dur = *loadFor
	}
	s := startServer(t, "--max-sessions", "128")
	c := newClient(s)
	if lim := hostileLimits["pids"]; lim == nil {
		t.Fatal("no pids limit: refusing to run a fork bomb")
	}
	benign, err := c.create(nil)
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("warden"), 64<<10/6)
	unloaded := benignLoop(t, c, benign, payload, time.Now().Add(5*time.Second), nil)
	rss0 := rssKiB(s.pid)

	var stop atomic.Bool
	var wg sync.WaitGroup
	var hostileRuns, hostileErrs atomic.Int64
	for i := 0; i < hostile; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			id, err := c.create(hostileLimits)
			if err != nil {
				hostileErrs.Add(1)
				return
			}
			for k := i; !stop.Load(); k++ {
				var r spec.Result
				err := c.json("POST", "/v1/sessions/"+id+"/exec", map[string]any{"command": []string{"sh", "-c", hostileScripts[k%len(hostileScripts)]}}, &r, http.StatusOK)
				if err != nil {
					hostileErrs.Add(1)
					time.Sleep(100 * time.Millisecond)
					continue
				}
				hostileRuns.Add(1)
			}
		}(i)
	}
	var health []float64
	var healthErrs int
	var rssMax int64
	probe := func() {
		start := time.Now()
		if code, _, err := c.do("GET", "/healthz", "", nil); err != nil || code != http.StatusOK {
			healthErrs++
		} else {
			health = append(health, msSince(start))
		}
		rssMax = max(rssMax, rssKiB(s.pid))
	}
	// Two halves: the server may keep what the first flood needed (Go
	// returns freed memory to the kernel lazily), but the second must not
	// add to it, or it grows per flood.
	loaded := benignLoop(t, c, benign, payload, time.Now().Add(dur/2), probe)
	rssHalf, liveHalf := rssKiB(s.pid), c.heapLive()
	second := benignLoop(t, c, benign, payload, time.Now().Add(dur/2), probe)
	loaded.lat, loaded.errs = append(loaded.lat, second.lat...), append(loaded.errs, second.errs...)
	rssEnd, liveEnd := rssKiB(s.pid), c.heapLive()
	stop.Store(true)
	wg.Wait()
	rss1 := rssKiB(s.pid)

	t.Logf("hostile sessions: %d, runs: %d, their errors: %d", hostile, hostileRuns.Load(), hostileErrs.Load())
	t.Logf("benign exec 1+1 unloaded: n=%d p50=%.2f ms p99=%.2f ms", len(unloaded.lat), pctl(unloaded.lat, 50), pctl(unloaded.lat, 99))
	t.Logf("benign exec 1+1 loaded:   n=%d p50=%.2f ms p99=%.2f ms, errors %d", len(loaded.lat), pctl(loaded.lat, 50), pctl(loaded.lat, 99), len(loaded.errs))
	t.Logf("/healthz loaded: n=%d p50=%.2f ms p99=%.2f ms, errors %d", len(health), pctl(health, 50), pctl(health, 99), healthErrs)
	t.Logf("server RSS: before %d KiB, after the first half %d KiB, after the second %d KiB, max %d KiB, after the load %d KiB", rss0, rssHalf, rssEnd, rssMax, rss1)
	t.Logf("server live heap (after its last GC): %d KiB after the first half, %d KiB after the second", liveHalf>>10, liveEnd>>10)
	if len(loaded.errs) > 0 || len(unloaded.errs) > 0 {
		t.Errorf("the benign client saw errors: %q", append(unloaded.errs, loaded.errs...))
	}
	if healthErrs > 0 {
		t.Errorf("/healthz failed %d times under load", healthErrs)
	}
	// Floods pass through the server but none of them may stay in it: the
	// heap the collector finds live must not grow from one half to the
	// next (RSS may, as Go returns freed memory to the kernel lazily).
	if liveHalf <= 0 || liveEnd <= 0 {
		t.Errorf("could not read go_gc_heap_live_bytes from /metrics (%d, %d)", liveHalf, liveEnd)
	} else if liveEnd > liveHalf+maxGrowthKiB<<10 {
		t.Errorf("the server's live heap grew from %d KiB after the first half of the load to %d KiB after the second", liveHalf>>10, liveEnd>>10)
	}
	if rssMax > maxServerKiB {
		t.Errorf("server RSS reached %d KiB, over %d", rssMax, maxServerKiB)
	}
}

// Bounds on the server's memory under the hostile load: a second half of
// floods may add at most maxGrowthKiB to the live heap the first left
// (floods in flight at either moment differ by a few MiB of JSON each),
// and the server's RSS never passes maxServerKiB.
const (
	maxGrowthKiB = 48 << 10
	maxServerKiB = 1 << 20
)

// heapLive reads the server's go_gc_heap_live_bytes, or -1.
func (c *client) heapLive() int64 {
	req, err := http.NewRequest("GET", c.url+"/metrics", nil)
	if err != nil {
		return -1
	}
	req.Header.Set("Authorization", "Bearer "+keyOperator)
	resp, err := c.hc.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return -1
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "go_gc_heap_live_bytes "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return int64(f)
			}
		}
	}
	return -1
}

type benignStats struct {
	lat  []float64
	errs []string
}

// benignLoop runs benign rounds until deadline, calling each (if set)
// between rounds.
func benignLoop(t *testing.T, c *client, id string, payload []byte, deadline time.Time, each func()) benignStats {
	t.Helper()
	var st benignStats
	for time.Now().Before(deadline) {
		d, err := c.benignRound(id, payload)
		if err != nil {
			st.errs = append(st.errs, err.Error())
			if len(st.errs) > 20 {
				break
			}
			continue
		}
		st.lat = append(st.lat, float64(d.Microseconds())/1000)
		if each != nil {
			each()
		}
	}
	return st
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func pctl(xs []float64, p int) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, len(s)*p/100)]
}

// rssKiB is a process's resident memory.
func rssKiB(pid int) int64 {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			return n
		}
	}
	return 0
}
