//go:build !slim

package main

import "testing"

// TestSnapshotMemoryFlag: serve keeps memory in snapshots by default
// (issue 22), and --snapshot-memory=false is the operator's way to keep
// every snapshot to files without leaving the stream.
func TestSnapshotMemoryFlag(t *testing.T) {
	f := newServeCmd().Flags()
	fl := f.Lookup("snapshot-memory")
	if fl == nil || fl.DefValue != "true" {
		t.Fatalf("serve --snapshot-memory = %+v, want a flag defaulting to true", fl)
	}
	if err := f.Parse([]string{"--snapshot-memory=false"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := f.GetBool("snapshot-memory"); got {
		t.Errorf("--snapshot-memory=false parsed as %v, want false", got)
	}
}
