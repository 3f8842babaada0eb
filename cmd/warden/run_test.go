package main

import (
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestOnePSuffices: a run keeps to one P only when no egress proxy runs
// in the process beside the output drains.
func TestOnePSuffices(t *testing.T) {
	tests := []struct {
		mode spec.NetMode
		want bool
	}{
		{spec.NetNone, true},
		{spec.NetProxy, false},
	}
	for _, tt := range tests {
		s := spec.Spec{Network: spec.NetworkPolicy{Mode: tt.mode}}
		if got := onePSuffices(s); got != tt.want {
			t.Errorf("onePSuffices(--net %s) = %v, want %v", tt.mode, got, tt.want)
		}
	}
}

// TestCheckExecutor: --executor takes auto, go or fast, and only the
// native backend has a choice.
func TestCheckExecutor(t *testing.T) {
	tests := []struct {
		backend  string
		executor native.Executor
		wantErr  string
	}{
		{"native", "auto", ""},
		{"native", "go", ""},
		{"native", "fast", ""},
		{"", "fast", ""},
		{"native", "rust", `--executor "rust": want one of auto, go, fast`},
		{"gvisor", "auto", ""},
		{"gvisor", "go", "--executor go: only --backend native has a choice of executor"},
		{"docker", "fast", "--executor fast: only --backend native has a choice of executor"},
		{"bogus", "fast", `backend "bogus" is unknown: use ` + sandbox.BackendChoices()},
	}
	for _, tt := range tests {
		err := checkExecutor(tt.backend, sandbox.BackendOptions{Executor: tt.executor})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("--backend %s --executor %s: %v, want no error", tt.backend, tt.executor, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("--backend %s --executor %s: %v, want an error containing %q", tt.backend, tt.executor, err, tt.wantErr)
		}
	}
}

// TestExecutorFlag: --executor lands in the backend options every
// command hands its backend, auto when not given.
func TestExecutorFlag(t *testing.T) {
	tests := []struct {
		args []string
		want native.Executor
	}{
		{nil, native.ExecutorAuto},
		{[]string{"--executor", "go"}, native.ExecutorGo},
		{[]string{"--executor=fast"}, native.ExecutorFast},
	}
	for _, tt := range tests {
		var o sandbox.BackendOptions
		var backend string
		f := pflag.NewFlagSet("test", pflag.ContinueOnError)
		addBackendFlags(f, &backend, "backend", &o)
		if err := f.Parse(tt.args); err != nil {
			t.Fatalf("parsing %q: %v", tt.args, err)
		}
		if o.Executor != tt.want {
			t.Errorf("%q: Executor = %q, want %q", tt.args, o.Executor, tt.want)
		}
	}
}

// TestRunTransportIsTheBackendsDefault: warden run takes each backend's
// own agent transport, as the server's one-shots and sessions do (one
// rule): the stream on gvisor, descriptors on native.
func TestRunTransportIsTheBackendsDefault(t *testing.T) {
	tests := []struct {
		backend string
		want    native.AgentTransport
	}{
		{"gvisor", native.TransportStream},
		{"native", native.TransportFD},
		{"docker", native.TransportFD},
	}
	for _, tt := range tests {
		o := runOptions{backend: tt.backend, net: string(spec.NetNone)}
		release, err := o.prepare([]string{"true"})
		if err != nil {
			t.Fatalf("--backend %s: prepare: %v", tt.backend, err)
		}
		release()
		if got := o.backendOpts.AgentTransport; got != tt.want {
			t.Errorf("warden run --backend %s: agent transport %q, want %q", tt.backend, got, tt.want)
		}
	}
}
