//go:build !slim

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestCheckKubeKeys: the kubernetes backend refuses a keyless server in
// one line naming the keys' flag; other backends and a keyed server pass.
func TestCheckKubeKeys(t *testing.T) {
	for _, c := range []struct {
		backend string
		keys    []string
		want    string
	}{
		{sandbox.KubernetesBackend, nil, "--api-key-file"},
		{sandbox.KubernetesBackend, []string{"k"}, ""},
		{"native", nil, ""},
	} {
		err := checkKubeKeys(c.backend, c.keys)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("checkKubeKeys(%s, %d keys): got %v, want nil", c.backend, len(c.keys), err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("checkKubeKeys(%s, %d keys): got %v, want one line naming %s", c.backend, len(c.keys), err, c.want)
		}
	}
}

// TestKubeFlagsRefuseWithoutRouterKey: the backend serve's flags make
// refuses to start without --kube-router-key, or with a short key, in one
// line naming the flag, before any cluster is reached.
func TestKubeFlagsRefuseWithoutRouterKey(t *testing.T) {
	short := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(short, []byte("too short"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{nil, {"--kube-router-key", short}} {
		var o sandbox.BackendOptions
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		addKubeFlags(f, &o)
		if err := f.Parse(args); err != nil {
			t.Fatal(err)
		}
		_, err := o.Kubernetes(sandbox.KubernetesBackend)
		if err == nil || !strings.Contains(err.Error(), "--kube-router-key") || strings.Contains(err.Error(), "\n") {
			t.Errorf("flags %q: got %v, want one line naming --kube-router-key", args, err)
		}
	}
}

// TestKubeFlagsRefuseBadAdvertise: a malformed --kube-advertise fails the
// backend's start in one line naming the flag, before any cluster is
// reached.
func TestKubeFlagsRefuseBadAdvertise(t *testing.T) {
	key := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(key, []byte(strings.Repeat("k", 32)), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, addr := range []string{"router:8080", "0.0.0.0:8080", "10.0.0.7"} {
		var o sandbox.BackendOptions
		f := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		addKubeFlags(f, &o)
		if err := f.Parse([]string{"--kube-router-key", key, "--kube-advertise", addr}); err != nil {
			t.Fatal(err)
		}
		_, err := o.Kubernetes(sandbox.KubernetesBackend)
		if err == nil || !strings.Contains(err.Error(), "--kube-advertise") || strings.Contains(err.Error(), "\n") {
			t.Errorf("--kube-advertise %q: got %v, want one line naming --kube-advertise", addr, err)
		}
	}
}
