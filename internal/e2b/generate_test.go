package e2b

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
)

// generated lists the files proto/generate.sh writes, relative to
// internal/e2b.
var generated = []string{
	"processpb/process.pb.go",
	"processpb/processpbconnect/process.connect.go",
	"filesystempb/filesystem.pb.go",
	"filesystempb/filesystempbconnect/filesystem.connect.go",
}

// TestGeneratedUpToDate regenerates the envd code from proto/*.proto and
// fails if it differs from the committed files: CI never runs go
// generate, so a .proto edit without `go generate ./internal/e2b` would
// otherwise ship code that disagrees with the files it claims to match.
// Without protoc it skips, except under WARDEN_CI=1, where it must run.
func TestGeneratedUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("skipping in -short mode: builds the protoc plugins")
	}
	for _, tool := range []string{"protoc", "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("WARDEN_CI") == "1" {
				t.Fatalf("%s is needed to check the generated code (apt-get install protobuf-compiler): %v", tool, err)
			}
			t.Skipf("skipping: %s is needed to regenerate the envd code: %v", tool, err)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("sh", "proto/generate.sh", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("running proto/generate.sh: %v\n%s", err, msg)
	}
	for _, f := range generated {
		want, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatalf("generate.sh wrote no %s: %v", f, err)
		}
		got, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(withoutProtocVersion(got), withoutProtocVersion(want)) {
			t.Errorf("%s is stale: run `go generate ./internal/e2b` and commit the result", f)
		}
	}
}

// protocVersionLine is the header line protoc-gen-go writes naming the
// protoc that ran, which is the host's (Debian's protobuf-compiler), not
// part of what the .proto files decide.
var protocVersionLine = regexp.MustCompile(`(?m)^// \tprotoc +\S+\n`)

// withoutProtocVersion is generated code without its protoc version line,
// so a host with another protoc release than the committer's compares the
// code alone rather than failing on the header.
func withoutProtocVersion(b []byte) []byte {
	return protocVersionLine.ReplaceAll(b, nil)
}

// TestWithoutProtocVersion: only the protoc version line is ignored.
func TestWithoutProtocVersion(t *testing.T) {
	a := []byte("// versions:\n// \tprotoc-gen-go v1.36.12\n// \tprotoc        v3.21.12\n// source: x.proto\n")
	b := []byte("// versions:\n// \tprotoc-gen-go v1.36.12\n// \tprotoc        v5.29.3\n// source: x.proto\n")
	if !bytes.Equal(withoutProtocVersion(a), withoutProtocVersion(b)) {
		t.Errorf("%q and %q differ beyond the protoc version", withoutProtocVersion(a), withoutProtocVersion(b))
	}
	if c := []byte("// \tprotoc-gen-go v1.36.12\n"); !bytes.Equal(withoutProtocVersion(c), c) {
		t.Errorf("the protoc-gen-go line was dropped")
	}
}
