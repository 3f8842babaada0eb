package poddial

import (
	"net"
	"slices"
	"strconv"
	"testing"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/podinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// TestPodEgress: a Pod session with --net proxy reaches this process's
// egress proxy through the Pod agent's bridge on its 127.0.0.1:3128 (a
// stream channel per connection, which the session relays to its socket
// on the proxy): its execs have the proxy environment, a host the rules
// do not allow gets the proxy's own 403, and the proxy's audit records
// it. A --net none session has no proxy environment. Nothing leaves
// this host: the proxy answers the refusal itself.
func TestPodEgress(t *testing.T) {
	testhost.HoldHostPort(t, agent.EgressPort)
	requireEgressPortFree(t)
	sp := podSpec()
	sp.Network = spec.NetworkPolicy{Mode: spec.NetProxy, Allow: []string{"allowed.test"}}
	s := attachSpec(t, startPod(t, testhost.DropAllCaps), podinit.Adopted, sp)
	url := "http://127.0.0.1:" + strconv.Itoa(agent.EgressPort)
	r := execSh(t, s, "echo $HTTP_PROXY; curl -sS -m 20 -o /dev/null -w '%{http_code}' http://denied.test/")
	if want := url + "\n403"; r.Stdout != want || r.ExitCode != 0 {
		t.Errorf("through the bridge: printed %q (exit %d, stderr %q), want %q", r.Stdout, r.ExitCode, r.Stderr, want)
	}
	if ev := s.NetworkEvents(); !slices.ContainsFunc(ev, func(e spec.NetworkEvent) bool { return e.Host == "denied.test" && !e.Allowed }) {
		t.Errorf("the proxy's audit = %+v, want denied.test refused", ev)
	}
	none := attachSpec(t, startPod(t, testhost.DropAllCaps), podinit.Adopted, podSpec())
	if r := execSh(t, none, "env | grep -ci _proxy="); r.Stdout != "0\n" {
		t.Errorf("a --net none session's proxy variables: printed %q (stderr %q), want 0", r.Stdout, r.Stderr)
	}
}

// requireEgressPortFree skips (fails under WARDEN_CI=1) while something
// else holds 127.0.0.1:3128: the test's Pods share the host's network
// namespace, where the Pod's bridge listens. Other Warden tests that bind
// it (kubeback's bed egress) are kept out by testhost.HoldHostPort; this
// catches anything else on the host.
func requireEgressPortFree(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(agent.EgressPort)))
	if err != nil {
		testhost.SkipOrFail(t, "the Pod's bridge needs 127.0.0.1:"+strconv.Itoa(agent.EgressPort)+" of the host's network namespace, which the test's Pods share: "+err.Error())
	}
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
}
