package spec

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func validSpec() Spec {
	return Spec{Command: []string{"true"}, Limits: DefaultLimits, Network: NetworkPolicy{Mode: NetNone}}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*Spec)
		wantErr string
	}{
		{"defaults", func(*Spec) {}, ""},
		{"no command", func(s *Spec) { s.Command = nil }, "no command"},
		{"empty command", func(s *Spec) { s.Command = []string{""} }, "no command"},
		{"env without =", func(s *Spec) { s.Env = []string{"FOO"} }, "not KEY=VALUE"},
		{"env empty name", func(s *Spec) { s.Env = []string{"=x"} }, "empty name"},
		{"env NUL", func(s *Spec) { s.Env = []string{"A=b\x00c"} }, "NUL"},
		{"relative workspace", func(s *Spec) { s.Workspace = "out" }, "not an absolute path"},
		{"timeout too long", func(s *Spec) { s.Limits.Timeout = 48 * time.Hour }, "timeout"},
		{"memory too small", func(s *Spec) { s.Limits.MemoryBytes = 1024 }, "too small"},
		{"memory zero ok", func(s *Spec) { s.Limits.MemoryBytes = 0 }, ""},
		{"negative pids", func(s *Spec) { s.Limits.Pids = -1 }, "pids"},
		{"too many cpus", func(s *Spec) { s.Limits.CPUs = 5000 }, "cpus"},
		{"NaN cpus", func(s *Spec) { s.Limits.CPUs = math.NaN() }, "cpus"},
		{"too few cpus", func(s *Spec) { s.Limits.CPUs = 0.001 }, "cpus"},
		{"disk too small", func(s *Spec) { s.Limits.DiskBytes = 10 }, "disk"},
		{"fractional cpu time", func(s *Spec) { s.Limits.CPUTime = 1500 * time.Millisecond }, "whole seconds"},
		{"unknown net", func(s *Spec) { s.Network.Mode = "bridge" }, "unknown"},
		{"allow without proxy", func(s *Spec) { s.Network.Allow = []string{"example.com"} }, "--allow and --deny need --net proxy"},
		{"bad allow rule", func(s *Spec) { s.Network = NetworkPolicy{Mode: NetProxy, Allow: []string{"http://x/"}} }, "HOST[:PORT]"},
		{"proxy ok", func(s *Spec) { s.Network = NetworkPolicy{Mode: NetProxy, Allow: []string{"*.example.com:443"}} }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			tt.mutate(&s)
			err := s.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("Validate() = %q, want one line", err)
			}
		})
	}
}

func TestInodes(t *testing.T) {
	tests := []struct {
		disk int64
		want int64
	}{
		{MiB, 1024},
		{256 * MiB, 65536},
	}
	for _, tt := range tests {
		l := Limits{DiskBytes: tt.disk}
		if got := l.Inodes(); got != tt.want {
			t.Errorf("Inodes() with disk %d = %d, want %d", tt.disk, got, tt.want)
		}
	}
}

// TestRootValidate: a template needs an absolute clean directory, a
// directory needs a template's name, and the image's env must be
// KEY=VALUE; the zero Root (the host's) is valid.
func TestRootValidate(t *testing.T) {
	tpl := Root{Template: "py", Dir: "/var/lib/warden/templates/roots/sha256-ab", Digest: "sha256:ab", Env: []string{"PATH=/usr/bin"}}
	tests := []struct {
		name    string
		mutate  func(*Root)
		wantErr string
	}{
		{"template ok", func(*Root) {}, ""},
		{"host", func(r *Root) { *r = Root{} }, ""},
		{"dir without template", func(r *Root) { r.Template = "" }, "without a template name"},
		{"template without dir", func(r *Root) { r.Dir = "" }, "no root directory"},
		{"relative dir", func(r *Root) { r.Dir = "roots/x" }, "not an absolute clean path"},
		{"unclean dir", func(r *Root) { r.Dir = "/var/lib/../x" }, "not an absolute clean path"},
		{"trailing slash", func(r *Root) { r.Dir = "/x/" }, "not an absolute clean path"},
		{"host slash", func(r *Root) { r.Dir = "/" }, "host's /"},
		{"bad env", func(r *Root) { r.Env = []string{"PATH"} }, "not KEY=VALUE"},
		{"env NUL", func(r *Root) { r.Env = []string{"A=\x00"} }, "NUL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := validSpec()
			s.Root = tpl
			s.Root.Env = append([]string(nil), tpl.Env...)
			tt.mutate(&s.Root)
			err := s.Validate()
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tt.wantErr)
			case err != nil && !errors.Is(err, ErrInvalid):
				t.Errorf("Validate() = %v, want it to wrap ErrInvalid", err)
			case err != nil && strings.Contains(err.Error(), "\n"):
				t.Errorf("Validate() = %q, want one line", err)
			}
		})
	}
}
