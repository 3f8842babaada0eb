package main

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
)

// templateCLI runs `warden template args...` and returns stdout and the error.
func templateCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := newTemplateCmd()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

// TestTemplateCLI walks import, ls, rm and gc on a random image, and the
// errors for a missing --name, "host" and no state directory.
func TestTemplateCLI(t *testing.T) {
	state := t.TempDir()
	// gc's docker step must not depend on the host's engine: point it at
	// a socket nobody listens on.
	t.Setenv("DOCKER_HOST", "unix://"+filepath.Join(state, "no-engine.sock"))
	img, err := random.Image(1024, 2)
	if err != nil {
		t.Fatal(err)
	}
	lp := filepath.Join(t.TempDir(), "layout")
	p, err := layout.Write(lp, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	sd := "--state-dir=" + state
	// The gVisor and microvm roots of the template (and of one no store
	// holds), in directories of the test's: rm removes both of each, the
	// host's stay untouched.
	testRootBackends(t)
	digest, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rootBackends {
		for _, d := range []string{"img-" + digest.Hex + "-0011aabb/usr", "img-" + strings.Repeat("e", 64) + "-0011aabb", "runsc"} {
			if err := os.MkdirAll(filepath.Join(b.State, d), 0o700); err != nil {
				t.Fatal(err)
			}
		}
	}
	steps := []struct {
		args    []string
		want    string // in stdout, or in the error when wantErr
		wantErr bool
	}{
		{[]string{"import", lp, sd}, "needs --name", true},
		{[]string{"import", lp, "--name=rand", sd}, "2 layers unpacked", false},
		{[]string{"ls", sd}, "rand", false},
		{[]string{"share", "rand", "aaaaaaaaaaaaaaaa,keyless", sd}, "rand\tshared with aaaaaaaaaaaaaaaa,keyless", false},
		{[]string{"ls", sd}, "aaaaaaaaaaaaaaaa,keyless", false},
		{[]string{"share", "rand", "Bad", sd}, `tenant "Bad"`, true},
		{[]string{"share", "nope", "all", sd}, `no template "nope"`, true},
		{[]string{"share", "rand", "all", sd}, "rand\tshared with all", false},
		{[]string{"rm", "host", sd}, "reserved", true},
		{[]string{"ls", "--state-dir=none"}, "pass --state-dir", true},
		{[]string{"rm", "rand", sd}, "removed 2 gvisor roots of removed templates\nremoved 2 microvm roots of removed templates", false},
		{[]string{"gc", sd}, "removed 2 layers", false},
		{[]string{"gc", sd}, "docker images not checked: no engine answers", false},
	}
	wantRoots := 3 // until rm removes the template, then runsc alone
	for _, s := range steps {
		out, err := templateCLI(t, s.args...)
		got := out
		if s.wantErr {
			if err == nil {
				t.Fatalf("%v: got no error, want one containing %q", s.args, s.want)
			}
			got = err.Error()
		} else if err != nil {
			t.Fatalf("%v: %v", s.args, err)
		}
		if !strings.Contains(got, s.want) {
			t.Errorf("%v: got %q, want %q in it", s.args, got, s.want)
		}
		if s.args[0] == "rm" && !s.wantErr {
			wantRoots = 1
		}
		for _, b := range rootBackends {
			if ents, _ := os.ReadDir(b.State); len(ents) != wantRoots {
				t.Errorf("after %v: %d entries in the state directory %s, want %d (3 before rm, only runsc after)", s.args, len(ents), b.State, wantRoots)
			}
		}
	}
}

// TestTemplateGCHungEngine: gc's docker step, which runs under the
// store's lock, gives up on an engine that accepts and never answers,
// with an error saying so, rather than holding the lock for good.
func TestTemplateGCHungEngine(t *testing.T) {
	state := t.TempDir()
	sock := filepath.Join(t.TempDir(), "hung.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	accepting := make(chan struct{})
	defer func() {
		l.Close()
		<-accepting
	}()
	go func() {
		defer close(accepting)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		for range 100 { // bounded: gc opens a connection or two
			c, err := l.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Setenv("DOCKER_HOST", "unix://"+sock)
	testRootBackends(t)
	defer func(old time.Duration) { dockerGCTimeout = old }(dockerGCTimeout)
	dockerGCTimeout = 100 * time.Millisecond
	done := make(chan error, 1)
	go func() {
		_, err := templateCLI(t, "gc", "--state-dir="+state)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not answer within") {
			t.Errorf("gc with a hung engine: got %v, want it to say the engine did not answer", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("gc still waits on a hung Docker engine after 2 minutes, holding the store's lock")
	}
}

// testRootBackends points the backends' template roots at directories
// of the test's for its duration: the host's stay untouched.
func testRootBackends(t *testing.T) {
	old := rootBackends
	t.Cleanup(func() { rootBackends = old })
	rootBackends = slices.Clone(old)
	for i := range rootBackends {
		rootBackends[i].State = t.TempDir()
	}
}
