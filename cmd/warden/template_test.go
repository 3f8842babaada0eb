package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"

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
		{[]string{"rm", "rand", sd}, "", false},
		{[]string{"gc", sd}, "removed 2 layers", false},
		{[]string{"gc", sd}, "docker images not checked: no engine answers", false},
	}
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
	}
}
