package kubeback_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/kubebed"
)

// testServeReplicas: two warden serve processes (the real binary) with
// --kube-advertise serve one session. Created at A, its interpreter's
// state is reached through B (forwarded). A is then killed (SIGKILL)
// during an exec streamed through B: the stream at B's client is cut
// (no result), B takes the session over at the next request (the
// interpreter's state went with A's connection, the files are kept),
// and the claim names B.
func testServeReplicas(ctx context.Context, t *testing.T, bed *kubebed.Bed, bin, dir string) {
	addrA, addrB := freeAddr(t), freeAddr(t)
	a := startServe(t, bin, dir, addrA, "--kube-advertise", addrA)
	b := startServe(t, bin, dir, addrB, "--kube-advertise", addrB)
	var created struct{ ID string }
	call(ctx, t, http.MethodPost, a.url+"/v1/sessions", `{}`, http.StatusCreated, &created)
	id := created.ID
	if h := holderOf(ctx, t, bed, id); !strings.HasPrefix(h, addrA+"/") {
		t.Errorf("the claim's holder: got %q, want A's %s with its proof", h, addrA)
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
	call(ctx, t, http.MethodPost, b.url+"/v1/sessions/"+id+"/exec", `{"command":["sh","-c","echo kept > /workspace/kept"]}`, http.StatusOK, nil)
	measureForward(ctx, t, a.url, b.url, id)
	if h := holderOf(ctx, t, bed, id); !strings.HasPrefix(h, addrA+"/") {
		t.Errorf("the claim's holder after B forwarded: got %q, want still A's %s", h, addrA)
	}
	killHolderMidStream(ctx, t, a, b.url, id)
	call(ctx, t, http.MethodPost, b.url+"/v1/sessions/"+id+"/exec", `{"language":"python","code":"print(x)"}`, http.StatusOK, &res)
	if res.Exception == nil || res.Exception.Type != "NameError" {
		t.Errorf("x at B after A was killed: got %+v, want a NameError (B took over; processes restart)", res)
	}
	call(ctx, t, http.MethodPost, b.url+"/v1/sessions/"+id+"/exec", `{"command":["cat","/workspace/kept"]}`, http.StatusOK, &res)
	if res.Stdout != "kept\n" {
		t.Errorf("the file after B took over: got %q, want it kept", res.Stdout)
	}
	if h := holderOf(ctx, t, bed, id); !strings.HasPrefix(h, addrB+"/") {
		t.Errorf("the claim's holder after B took over: got %q, want B's %s", h, addrB)
	}
	call(ctx, t, http.MethodDelete, b.url+"/v1/sessions/"+id, "", http.StatusNoContent, nil)
}

// killHolderMidStream streams an exec through bURL, kills the holder a
// once its first event arrived, and checks that the stream then ends
// without a result (cut: the client retries), within a minute.
func killHolderMidStream(ctx context.Context, t *testing.T, a served, bURL, id string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, bURL+"/v1/sessions/"+id+"/exec/stream",
		strings.NewReader(`{"command":["sh","-c","echo started; sleep 120"]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+apiKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("exec stream through B: status %d, want 200", resp.StatusCode)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		r := bufio.NewReader(resp.Body)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return // the stream ended, cut or not
			}
			lines <- l
		}
	}()
	if first := <-lines; !strings.Contains(first, "started") {
		t.Fatalf("first event through B: got %q, want the stdout of echo", first)
	}
	a.kill()
	for l := range lines {
		if strings.Contains(l, `"type":"result"`) {
			t.Errorf("the stream through B after its holder was killed: got %q, want it cut", l)
		}
	}
	if ctx.Err() != nil {
		t.Error("the stream through B did not end within a minute of its holder's death")
	}
}

// freeAddr is a loopback address with a port free at the time, for a
// replica that must know the address it advertises before it listens.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}
