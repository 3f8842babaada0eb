//go:build !slim

package main

import (
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/native"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// TestSnapshotCompressionFlag: serve writes gVisor memory uncompressed
// by default (issue 22's fast resume) and its help names the values;
// --snapshot-compression fast parses to gvisor.CompressionFast.
func TestSnapshotCompressionFlag(t *testing.T) {
	tests := []struct {
		args []string
		want gvisor.Compression
	}{
		{nil, gvisor.CompressionNone},
		{[]string{"--snapshot-compression", "none"}, gvisor.CompressionNone},
		{[]string{"--snapshot-compression=fast"}, gvisor.CompressionFast},
	}
	for _, tt := range tests {
		f := newServeCmd().Flags()
		fl := f.Lookup("snapshot-compression")
		if fl == nil || fl.DefValue != "none" || !strings.Contains(fl.Usage, gvisor.CompressionChoices()) {
			t.Fatalf("serve --snapshot-compression = %+v, want a flag defaulting to none naming %s", fl, gvisor.CompressionChoices())
		}
		if err := f.Parse(tt.args); err != nil {
			t.Fatalf("serve %v: %v", tt.args, err)
		}
		if got := fl.Value.String(); got != string(tt.want) {
			t.Errorf("serve %v: --snapshot-compression = %q, want %q", tt.args, got, tt.want)
		}
	}
}

// TestCheckSnapshotCompression: a bad value is refused in one line
// naming the values, as --agent-transport's is, and fast wherever no
// memory image is written for it to compress, in one line saying why
// and what to change; none passes everywhere.
func TestCheckSnapshotCompression(t *testing.T) {
	tests := []struct {
		backend   string
		transport native.AgentTransport
		c         gvisor.Compression
		memory    bool
		stateDir  string
		want      string
	}{
		{"gvisor", "", "zstd", true, "/s", `--snapshot-compression "zstd": want none or fast`},
		{"gvisor", "", gvisor.CompressionFast, true, "/s", ""},
		{"gvisor", native.TransportStream, gvisor.CompressionFast, true, "/s", ""},
		{"native", "", gvisor.CompressionNone, false, "none", ""},
		{"gvisor", "", gvisor.CompressionNone, false, "none", ""},
		{"native", "", gvisor.CompressionFast, true, "/s", "--snapshot-compression fast: only --backend gvisor writes memory snapshots: use it"},
		{"", "", gvisor.CompressionFast, true, "/s", "only --backend gvisor writes memory snapshots"},
		{"docker", "", gvisor.CompressionFast, true, "/s", "only --backend gvisor writes memory snapshots"},
		{"kubernetes", "", gvisor.CompressionFast, true, "/s", "only --backend gvisor writes memory snapshots"},
		{"gvisor", native.TransportFD, gvisor.CompressionFast, true, "/s", "--backend gvisor over --agent-transport fd writes no memory snapshot: use --agent-transport stream"},
		{"gvisor", "", gvisor.CompressionFast, false, "/s", "--snapshot-memory=false writes no memory image: drop one"},
		{"gvisor", "", gvisor.CompressionFast, true, "none", "--state-dir none keeps no snapshot: give a --state-dir"},
	}
	for _, tt := range tests {
		o := sandbox.BackendOptions{AgentTransport: tt.transport, SnapshotCompression: tt.c}
		err := checkSnapshotCompression(tt.backend, o, tt.memory, tt.stateDir)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%+v: checkSnapshotCompression() = %v, want nil", tt, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n")):
			t.Errorf("%+v: checkSnapshotCompression() = %v, want one line with %q", tt, err, tt.want)
		}
	}
}
