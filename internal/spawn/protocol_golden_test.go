package spawn

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// updateGolden rewrites testdata/protocol.golden from the code.
var updateGolden = flag.Bool("update", false, "rewrite testdata/protocol.golden")

// goldenPath holds the wire schema of every message between warden and
// warden-init, with the nsinit.Version it was made for.
var goldenPath = filepath.Join("testdata", "protocol.golden")

// wireMessages are the messages warden and warden-init exchange, which
// nsinit.Version versions: the init's (nsinit) and the spawner's (this
// package); the types they hold are followed from them.
var wireMessages = []any{
	nsinit.Config{}, nsinit.Status{}, nsinit.Refusal{}, nsinit.Request{}, nsinit.Event{},
	request{}, reply{},
}

// TestProtocolGolden: the JSON names and types of every protocol message
// are those recorded with the current nsinit.Version, so no message
// changes without a version bump (regenerate with go test
// ./internal/spawn -run TestProtocolGolden -update).
func TestProtocolGolden(t *testing.T) {
	got := protocolSchema()
	if *updateGolden {
		if err := os.WriteFile(goldenPath, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(goldenPath)
	if err != nil {
		t.Fatalf("reading %s: %v", goldenPath, err)
	}
	want := string(b)
	if got == want {
		return
	}
	gotHead, gotBody, _ := strings.Cut(got, "\n")
	wantHead, wantBody, _ := strings.Cut(want, "\n")
	if gotBody != wantBody && gotHead == wantHead {
		t.Fatalf("protocol messages changed: bump nsinit.Version and regenerate %s (-update)\ngot:\n%s\nwant:\n%s", goldenPath, got, want)
	}
	t.Fatalf("nsinit.Version changed: regenerate %s (-update): got %q, want %q", goldenPath, gotHead, wantHead)
}

// protocolSchema is the version line, then one line per field of every
// struct reachable from wireMessages: its Go type, its JSON name and type.
func protocolSchema() string {
	var b strings.Builder
	fmt.Fprintf(&b, "version %d\n", nsinit.Version)
	seen := map[reflect.Type]bool{}
	for _, m := range wireMessages {
		writeSchema(&b, reflect.TypeOf(m), seen)
	}
	return b.String()
}

func writeSchema(b *strings.Builder, t reflect.Type, seen map[reflect.Type]bool) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || seen[t] {
		return
	}
	seen[t] = true
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		fmt.Fprintf(b, "%s.%s %s %s %s\n", t.PkgPath()[strings.LastIndex(t.PkgPath(), "/")+1:], t.Name(), f.Name, name, f.Type)
	}
	for i := range t.NumField() {
		if t.Field(i).IsExported() {
			writeSchema(b, t.Field(i).Type, seen)
		}
	}
}
