package gvisor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/egress"
	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// fetchDef defines fetch(url) in a Python interpreter: the page at url
// through the box's egress proxy (HTTP_PROXY), "refused CODE" for the
// proxy's refusal, or "failed: ERROR" when the connection itself failed.
const fetchDef = `import urllib.request, urllib.error
def fetch(u):
    try:
        return urllib.request.urlopen(u, timeout=20).read().decode()
    except urllib.error.HTTPError as e:
        return "refused %d" % e.code
    except Exception as e:
        return "failed: %r" % e
`

// proxySpec is a box's spec with the egress proxy allowing only allow.
func proxySpec(allow ...string) spec.Spec {
	return spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetProxy, Allow: allow}}
}

// fetch runs fetch(url) in py and returns the page or the refusal.
func fetch(t *testing.T, py interp.Interpreter, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	out, err := py.Run(ctx, fmt.Sprintf("fetch(%q)", url), nil, nil)
	if err != nil || out.Exception != nil {
		t.Fatalf("fetch(%s): %+v, %v", url, out, err)
	}
	return strings.Trim(out.Value, `'"`)
}

// checkReach checks that py reaches n's allowed page through the proxy
// and is refused another address.
func checkReach(t *testing.T, what string, py interp.Interpreter, n internet) {
	t.Helper()
	if got, want := fetch(t, py, n.url("/allowed")), "hello from the internet, /allowed"; got != want {
		t.Errorf("%s: the allowed page = %q, want %q", what, got, want)
	}
	other := internet{ip: n.ip, port: n.port + 1}
	if got := fetch(t, py, other.url("/")); got != "refused 403" {
		t.Errorf("%s: a port the rules do not allow = %q, want the proxy's refusal (403)", what, got)
	}
}

// hasAllowed says whether events hold an allowed connection to host.
func hasAllowed(events []spec.NetworkEvent, host string) bool {
	for _, e := range events {
		if e.Allowed && strings.Contains(e.Host, host) {
			return true
		}
	}
	return false
}

// TestEgressFrame: only a box over the stream with the proxy has its
// session take the bridge's channels; over descriptors its bridge has
// its link, and a box without the proxy that opens a channel is a
// breach (the agent's TestStreamGuestChannelNeedsEgressChannels).
func TestEgressFrame(t *testing.T) {
	for _, tt := range []struct {
		stream, proxy, want bool
	}{
		{false, false, false}, {false, true, false}, {true, false, false}, {true, true, true},
	} {
		b := &box{r: &Runtime{Stream: tt.stream}}
		if tt.proxy {
			b.att = &egress.Attachment{}
		}
		if got := b.frame(noNet, nil).EgressChannels; got != tt.want {
			t.Errorf("stream %v, proxy %v: EgressChannels %v, want %v", tt.stream, tt.proxy, got, tt.want)
		}
	}
}

// TestSavesEgress: a box with the proxy is saved only over the stream,
// and only by a runsc whose checkpoint has --compression (one that can
// save the bridge's listener); a runsc whose help fails counts as one
// that cannot.
func TestSavesEgress(t *testing.T) {
	dir := t.TempDir()
	fake := func(name, script string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+script+"\n"), 0o700); err != nil {
			t.Fatal(err)
		}
		return p
	}
	newer := fake("newer", `echo "  -compression value"; echo "  -image-path string"`)
	older := fake("older", `echo "  -image-path string"`)
	broken := fake("broken", `echo "  -compression value"; exit 1`)
	for _, tt := range []struct {
		name, runsc string
		stream      bool
		want        string
	}{
		{"descriptors", newer, false, "over the descriptor transport"},
		{"newer runsc", newer, true, ""},
		{"older runsc", older, true, "cannot save a listening socket"},
		{"help fails", broken, true, "asking runsc what checkpoint supports"},
	} {
		err := (&Runtime{Runsc: tt.runsc, Stream: tt.stream}).SavesEgress()
		if tt.want == "" && err != nil || tt.want != "" && (!errors.Is(err, ErrCannotCheckpoint) || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("%s: SavesEgress() = %v, want ErrCannotCheckpoint saying %q (none if empty)", tt.name, err, tt.want)
		}
	}
}

// TestEgressTransports: a gVisor box with --net proxy reaches an allowed
// server on a stand-in internet through the proxy, and is refused any
// other, over either transport: over the stream its bridge's
// connections are channels the session relays to its proxy socket
// (Frame.EgressChannels), over descriptors they go by its egress link.
// The proxy's events name the connection.
func TestEgressTransports(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	n := startInternet(t)
	for _, stream := range []bool{false, true} {
		name := map[bool]string{false: "fd", true: "stream"}[stream]
		t.Run(name, func(t *testing.T) {
			sess := startBoxOn(t, &Runtime{Stream: stream}, proxySpec(n.rule()))
			py := newFetcher(t, sess)
			defer closeInterp(t, py)
			checkReach(t, name, py, n)
			if !hasAllowed(sess.NetworkEvents(), n.ip) {
				t.Errorf("the proxy's events %+v hold no allowed connection to %s", sess.NetworkEvents(), n.ip)
			}
		})
	}
}

// TestCheckpointEgress: a stream box with the egress proxy is saved
// whole, its interpreter running; each box restored from it gets a proxy
// socket of its own, with the rules of the spec it is restored with, and
// its bridge, which the restored agent points at the new stream, reaches
// it: x survives, the allowed page comes through, and a copy restored
// with rules that no longer allow the server is refused it; a connection
// held through the bridge at the checkpoint is cut in every copy; and a
// restore with network mode none is refused before it starts. A box over
// descriptors with the proxy is refused the checkpoint, and runs on; so
// is a stream box on a runsc that cannot save its bridge's listening
// socket (2022-12-19: SavesEgress), where the test ends there.
func TestCheckpointEgress(t *testing.T) {
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	n := startInternet(t)
	s := proxySpec(n.rule())

	fd := &Runtime{}
	fdSess := startBoxOn(t, fd, s)
	err := fd.Checkpoint(context.Background(), fdSess, t.TempDir()+"/ckpt", CheckpointOptions{})
	if !errors.Is(err, ErrCannotCheckpoint) || !strings.Contains(err.Error(), "egress proxy") {
		t.Errorf("Checkpoint(descriptors, proxy) = %v, want ErrCannotCheckpoint naming the egress proxy", err)
	}
	if res, err := fdSess.Exec(context.Background(), agent.ExecSpec{Command: []string{"true"}}, agent.IO{}); err != nil || res.ExitCode != 0 {
		t.Errorf("the refused box after the checkpoint: %+v, %v; want it running", res, err)
	}

	r := &Runtime{Stream: true}
	sess := startBoxOn(t, r, s)
	py := newFetcher(t, sess)
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if out, err := py.Run(ctx, "x = 42", nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("python: %+v, %v", out, err)
	}
	checkReach(t, "before the checkpoint", py, n)
	if why := r.SavesEgress(); why != nil {
		// runsc 2022-12-19: refused before the save, the box untouched.
		err := r.Checkpoint(ctx, sess, t.TempDir()+"/ckpt", CheckpointOptions{})
		if !errors.Is(err, ErrCannotCheckpoint) || !strings.Contains(err.Error(), "listening socket") {
			t.Errorf("Checkpoint(stream, proxy) on a runsc that cannot save a listener = %v, want ErrCannotCheckpoint naming it", err)
		}
		if out, err := py.Run(ctx, "x", nil, nil); err != nil || out.Value != "42" {
			t.Errorf("x after the refused checkpoint = %+v, %v; want 42", out, err)
		}
		checkReach(t, "after the refused checkpoint", py, n)
		closeInterp(t, py)
		t.Logf("this runsc cannot save the bridge's listener (%v): its refusal was checked, a restore cannot be", why)
		return
	}
	if out, err := py.Run(ctx, fmt.Sprintf(holdOne, agent.EgressPort), nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("holding a connection through the bridge: %+v, %v", out, err)
	}
	dir := checkpoint(t, r, sess, CheckpointOptions{})
	if err := py.Close(); err != nil {
		t.Logf("closing the interpreter of the saved box: %v (the box ended with the save)", err)
	}
	if _, err := r.Restore(ctx, noNet, dir); !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "network mode proxy, and the spec asks for none") {
		t.Errorf("Restore(network none) of a proxy box's checkpoint = %v, want ErrInvalid naming both modes", err)
	}
	for copyN, rules := range []spec.Spec{s, s, proxySpec("example.com")} {
		what := fmt.Sprintf("copy %d", copyN)
		restored := restore(t, r, rules, dir)
		py2 := adoptOnly(t, restored)
		if out, err := py2.Run(ctx, "x", nil, nil); err != nil || out.Value != "42" {
			t.Errorf("%s: x after the restore = %+v, %v; want 42", what, out, err)
		}
		if out, err := py2.Run(ctx, heldCut, nil, nil); err != nil || !strings.HasPrefix(strings.Trim(out.Value, `'"`), "cut") {
			t.Errorf("%s: the connection held through the bridge at the checkpoint = %+v, %v; want it cut", what, out, err)
		}
		if copyN < 2 {
			checkReach(t, what, py2, n)
			if !hasAllowed(restored.NetworkEvents(), n.ip) {
				t.Errorf("%s: its own proxy socket's events %+v hold no allowed connection to %s", what, restored.NetworkEvents(), n.ip)
			}
		} else if got := fetch(t, py2, n.url("/allowed")); got != "refused 403" {
			t.Errorf("%s, restored with rules that no longer allow the server: %q, want the proxy's refusal (403)", what, got)
		}
		closeInterp(t, py2)
	}
}

// holdOne opens a connection to the box's egress bridge (port %d) and
// holds it with half a request, as held.
const holdOne = `import socket
held = socket.create_connection(("127.0.0.1", %d), timeout=20)
held.sendall(b"GET http://example.org/ HTTP/1.1\r\nHost: example.org\r\n")
`

// heldCut says what became of held: "cut" and how where it was closed or
// reset, "open" where nothing came within its timeout, "data" where
// something did.
const heldCut = `def cut():
    try:
        return "cut: eof" if held.recv(1) == b"" else "data"
    except socket.timeout:
        return "open"
    except OSError as e:
        return "cut: %r" % e
cut()
`

// newFetcher starts a Python interpreter in sess with fetch defined.
func newFetcher(t *testing.T, sess *agent.Session) interp.Interpreter {
	t.Helper()
	py, err := interp.New("python", sess, sess.Env())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), CheckpointWait)
	defer cancel()
	if out, err := py.Run(ctx, fetchDef, nil, nil); err != nil || out.Exception != nil {
		t.Fatalf("defining fetch: %+v, %v", out, err)
	}
	return py
}

// adoptOnly adopts the one live process of restored, its interpreter.
func adoptOnly(t *testing.T, restored *agent.Session) interp.Interpreter {
	t.Helper()
	live := restored.Live()
	if len(live) != 1 {
		t.Fatalf("live processes %v, want the interpreter", live)
	}
	var id uint64
	for id = range live {
	}
	py, err := interp.Adopt("python", restored, restored, id, restored.Env())
	if err != nil {
		t.Fatalf("adopting the interpreter: %v", err)
	}
	return py
}

// closeInterp closes py, reporting a failure.
func closeInterp(t *testing.T, py interp.Interpreter) {
	t.Helper()
	if err := py.Close(); err != nil {
		t.Errorf("closing the interpreter: %v", err)
	}
}

// egressFetches is how many fetches of each box a round of
// TestMeasureEgressTransports runs.
const egressFetches = 10

// TestMeasureEgressTransports compares a fetch through the egress proxy
// from a gVisor box over the stream (a channel per connection, relayed
// by the session) with one over descriptors (the egress link), both
// boxes live at once and their fetches alternated within each round so
// load falls on both alike: per round the median of egressFetches each,
// and the round's ratio stream/fd. It asserts no timing (the host is
// shared); run it with WARDEN_MEASURE=1 and CGO_ENABLED=0.
func TestMeasureEgressTransports(t *testing.T) {
	if os.Getenv("WARDEN_MEASURE") == "" {
		t.Skip("set WARDEN_MEASURE=1 to measure egress over the stream transport against descriptors on gVisor")
	}
	requireRunsc(t)
	testhost.RequireTool(t, "python3")
	n := startInternet(t)
	s := proxySpec(n.rule())
	pys := map[string]interp.Interpreter{}
	for name, stream := range map[string]bool{"fd": false, "stream": true} {
		pys[name] = newFetcher(t, startBoxOn(t, &Runtime{Stream: stream}, s))
		defer closeInterp(t, pys[name])
	}
	var ratios []float64
	for round := range streamRounds {
		took := map[string][]time.Duration{}
		for i := range 2 * egressFetches {
			name := []string{"fd", "stream"}[(i+round)%2]
			begin := time.Now()
			if got := fetch(t, pys[name], n.url("/m")); got != "hello from the internet, /m" {
				t.Fatalf("%s: fetch = %q", name, got)
			}
			took[name] = append(took[name], time.Since(begin))
		}
		fd, st := median(took["fd"]), median(took["stream"])
		ratios = append(ratios, float64(st)/float64(fd))
		t.Logf("round %d, median of %d: fd %v, stream %v (%.2fx)", round, egressFetches, fd, st, float64(st)/float64(fd))
	}
	slices.Sort(ratios)
	t.Logf("stream/fd per-round ratio median %.2fx, range %.2fx to %.2fx", ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1])
}
