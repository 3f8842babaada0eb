package kubeback_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	extv1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/warden-sandbox/warden/internal/kubeback"
	"github.com/warden-sandbox/warden/internal/kubebed"
	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/server"
)

// liveReplica is a router replica serving the HTTP API on loopback, as
// warden serve --backend kubernetes --kube-advertise does.
type liveReplica struct {
	url, addr string
	m         *sandbox.Manager
	stop      func()
}

// newLiveReplica starts a replica: its listener first, so that its
// address is the one it records on its sessions' claims.
func newLiveReplica(t *testing.T, bed *kubebed.Bed) *liveReplica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	b, err := kubeback.NewWith("kubernetes", bed.RouterConfig, routerKey, kubeback.Config{Namespace: ns, ReadyTimeout: waitLong, Advertise: addr})
	if err != nil {
		t.Fatal(err)
	}
	m := sandbox.NewManager(b, sandbox.Config{})
	srv, err := server.New(m, server.Config{
		Keys: []string{apiKey}, Logger: slog.Default(),
		Replicas: server.ReplicasOf(b, m),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: time.Minute}
	go func() { _ = hs.Serve(ln) }() // it ends with Close below
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = hs.Close() // its listener and connections; nothing to report
		_ = m.Close()  // Close always returns nil
		_ = b.Close()  // Close always returns nil
	}
	t.Cleanup(stop)
	return &liveReplica{url: "http://" + addr, addr: addr, m: m, stop: stop}
}

// send sends body of type ctype with the API key and answers the
// status and the answer's body.
func send(ctx context.Context, t *testing.T, method, url, ctype, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", ctype)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(data)
}

// holderOf is the holder annotation on session id's claim.
func holderOf(ctx context.Context, t *testing.T, bed *kubebed.Bed, id string) string {
	t.Helper()
	var claim extv1.SandboxClaim
	if err := bed.Extensions.Get().Namespace(ns).Resource("sandboxclaims").Name(podclaim.ClaimName(id)).Do(ctx).Into(&claim); err != nil {
		t.Fatal(err)
	}
	return claim.Annotations[podclaim.HolderAnnotation]
}

// testLive: two live replicas serve one session. A claims it and
// records itself as holder; B forwards: the interpreter's state at B is
// A's, and a file uploaded through B is A's Pod's. Once A is gone, B
// takes the session over (the interpreter's state gone, its files kept)
// and records itself.
func testLive(ctx context.Context, t *testing.T, bed *kubebed.Bed) {
	a, b := newLiveReplica(t, bed), newLiveReplica(t, bed)
	var created struct{ ID string }
	call(ctx, t, http.MethodPost, a.url+"/v1/sessions", `{}`, http.StatusCreated, &created)
	id := created.ID
	if h := holderOf(ctx, t, bed, id); !strings.HasPrefix(h, a.addr+"/") {
		t.Errorf("the claim's holder: got %q, want A's %s with its proof", h, a.addr)
	}
	var res struct {
		Stdout    string
		Exception *struct{ Type string }
	}
	call(ctx, t, http.MethodPost, a.url+"/v1/sessions/"+id+"/exec", `{"language":"python","code":"x = 42"}`, http.StatusOK, nil)
	call(ctx, t, http.MethodPost, b.url+"/v1/sessions/"+id+"/exec", `{"language":"python","code":"print(x)"}`, http.StatusOK, &res)
	if res.Stdout != "42\n" {
		t.Errorf("x through B: got %q, want A's 42", res.Stdout)
	}
	if status, body := send(ctx, t, http.MethodPut, b.url+"/v1/sessions/"+id+"/files?path=/workspace/up", "application/octet-stream", "via B"); status != http.StatusCreated {
		t.Errorf("upload through B: got %d %s, want 201", status, body)
	}
	call(ctx, t, http.MethodPost, a.url+"/v1/sessions/"+id+"/exec", `{"command":["cat","/workspace/up"]}`, http.StatusOK, &res)
	if res.Stdout != "via B" {
		t.Errorf("the upload through B, read at A: got %q, want %q", res.Stdout, "via B")
	}
	if status, body := send(ctx, t, http.MethodGet, b.url+"/v1/sessions/"+id+"/files?path=/workspace/up", "", ""); status != http.StatusOK || body != "via B" {
		t.Errorf("download through B: got %d %q, want 200 %q", status, body, "via B")
	}
	if b.m.Holds(tenant(), id) {
		t.Error("B holds the session after forwarding: it must have stayed A's")
	}
	checkForgedHolder(ctx, t, bed, id)
	measureForward(ctx, t, a.url, b.url, id)
	a.stop()
	call(ctx, t, http.MethodPost, b.url+"/v1/sessions/"+id+"/exec", `{"language":"python","code":"print(x)"}`, http.StatusOK, &res)
	if res.Exception == nil || res.Exception.Type != "NameError" {
		t.Errorf("x at B after A stopped: got %+v, want a NameError (B took over; processes restart)", res)
	}
	call(ctx, t, http.MethodPost, b.url+"/v1/sessions/"+id+"/exec", `{"command":["cat","/workspace/up"]}`, http.StatusOK, &res)
	if res.Stdout != "via B" {
		t.Errorf("the file after B took over: got %q, want it kept", res.Stdout)
	}
	if h := holderOf(ctx, t, bed, id); !strings.HasPrefix(h, b.addr+"/") {
		t.Errorf("the claim's holder after B took over: got %q, want B's %s", h, b.addr)
	}
	call(ctx, t, http.MethodDelete, b.url+"/v1/sessions/"+id, "", http.StatusNoContent, nil)
}

// tenant is apiKey's tenant, as the server names it.
func tenant() string {
	sum := sha256.Sum256([]byte(apiKey))
	return hex.EncodeToString(sum[:8])
}

// measureForward times an exec of true through B (forwarded) and
// directly at A, interleaved, and logs the p50s and their ratio; never
// asserted (a loaded machine).
func measureForward(ctx context.Context, t *testing.T, aURL, bURL, id string) {
	const rounds = 15
	var direct, forwarded []time.Duration
	for range rounds {
		for _, url := range []string{aURL, bURL} {
			start := time.Now()
			call(ctx, t, http.MethodPost, url+"/v1/sessions/"+id+"/exec", `{"command":["true"]}`, http.StatusOK, nil)
			if url == aURL {
				direct = append(direct, time.Since(start))
			} else {
				forwarded = append(forwarded, time.Since(start))
			}
		}
	}
	slices.Sort(direct)
	slices.Sort(forwarded)
	dp, fp := direct[rounds/2], forwarded[rounds/2]
	t.Logf("exec of true, %d interleaved rounds: at A p50 %v (max %v); through B p50 %v (max %v); ratio of p50s %.2fx",
		rounds, dp, direct[rounds-1], fp, forwarded[rounds-1], float64(fp)/float64(dp))
}

// checkForgedHolder: a holder written on the claim without the router
// key's proof (by whoever may edit claims) is not followed: a replica
// that has not looked the holder up before (B remembers A's for 5 s)
// sends the tenant's request (and key) nowhere, dials the Pod itself and
// finds it busy, as A holds it.
func checkForgedHolder(ctx context.Context, t *testing.T, bed *kubebed.Bed, id string) {
	c := newLiveReplica(t, bed)
	defer c.stop()
	thief, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	go func() {
		for {
			c, err := thief.Accept()
			if err != nil {
				return // closed below
			}
			accepted.Add(1)
			_ = c.Close() // nothing to report: it only counts
		}
	}()
	defer thief.Close()
	good := holderOf(ctx, t, bed, id)
	setHolder(ctx, t, bed, id, thief.Addr().String()+"/"+strings.Repeat("00", 32))
	defer setHolder(ctx, t, bed, id, good)
	if status, body := send(ctx, t, http.MethodPost, c.url+"/v1/sessions/"+id+"/exec", "application/json", `{"command":["true"]}`); status != http.StatusConflict {
		t.Errorf("exec at C with a forged holder: got %d %s, want 409 (the Pod is A's)", status, body)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the forged holder got %d connections, want none", n)
	}
}

// setHolder writes v as session id's holder annotation, as anyone who
// may patch claims can.
func setHolder(ctx context.Context, t *testing.T, bed *kubebed.Bed, id, v string) {
	t.Helper()
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{podclaim.HolderAnnotation: v}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := bed.Extensions.Patch(types.MergePatchType).Namespace(ns).Resource("sandboxclaims").Name(podclaim.ClaimName(id)).Body(patch).Do(ctx).Error(); err != nil {
		t.Fatal(err)
	}
}
