package agent

import (
	"slices"
	"strings"
	"testing"
)

// TestImageEnv: an image's environment sets PATH, LANG and its own
// variables, but never who the user is, where its home and temporary
// files are, or the proxy; the caller's extra wins over all.
func TestImageEnv(t *testing.T) {
	image := []string{"PATH=/opt/conda/bin:/usr/bin", "LANG=de_DE.UTF-8", "HOME=/root", "USER=root", "TMPDIR=/var/tmp",
		"PWD=/", "SHELL=/bin/bash", "LOGNAME=root", "HTTP_PROXY=http://evil:1", "CONDA=1"}
	env := ImageEnv(true, image, []string{"CONDA=2"})
	want := map[string]string{
		"PATH": "/opt/conda/bin:/usr/bin", "LANG": "de_DE.UTF-8", "HOME": "/home/sandbox", "USER": "sandbox",
		"TMPDIR": "/tmp", "PWD": "/workspace", "SHELL": "/bin/sh", "LOGNAME": "sandbox",
		"HTTP_PROXY": "http://127.0.0.1:3128", "CONDA": "2",
	}
	got := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Errorf("%s appears twice in %q", k, env)
		}
		got[k] = v
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want %q", k, got[k], v)
		}
	}
	if !slices.Equal(Env(false, nil), ImageEnv(false, nil, nil)) {
		t.Errorf("Env without an image = %q, want the base %q", Env(false, nil), ImageEnv(false, nil, nil))
	}
}
