package vmguest

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
)

// goodBoot is a box's boot message as the microvm backend sends it.
func goodBoot() Boot {
	return Boot{Root: "root", Scratch: "scratch", Cache: "loose", Hostname: "sandbox", ScratchDirs: map[string]string{"workspace": "/workspace", "tmp": "/tmp"}, MemoryBytes: 256 << 20}
}

func TestBootRoundTrip(t *testing.T) {
	for _, want := range []Boot{goodBoot(), {Echo: true}} {
		b, err := want.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		r := bytes.NewReader(append(b, "the agent's config"...))
		got, err := ReadBoot(r)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("ReadBoot = %+v, %v; want %+v", got, err, want)
		}
		if r.Len() != len("the agent's config") {
			t.Errorf("ReadBoot consumed %d bytes past the message", len("the agent's config")-r.Len())
		}
	}
}

// bootFrame frames body as Marshal would, with version v and the length
// n it claims.
func bootFrame(v, n uint32, body string) []byte {
	b := append([]byte(bootMagic), binary.BigEndian.AppendUint32(nil, v)...)
	b = binary.BigEndian.AppendUint32(b, n)
	return append(b, body...)
}

// TestBadBoot feeds the guest's parser malformed messages: each is
// refused with a one-line error naming what is wrong, before anything is
// mounted.
func TestBadBoot(t *testing.T) {
	frame := func(body string) []byte { return bootFrame(Version, uint32(len(body)), body) }
	tests := []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "0 of 16 bytes"},
		{"garbage", []byte("\x1b[2J definitely not a boot message"), `not "WRDNBOOT"`},
		{"old version", bootFrame(1, 2, "{}"), "version 1"},
		{"huge length", bootFrame(Version, 1<<31, ""), "more than 65536"},
		{"short body", bootFrame(Version, 10, "{}"), "10 bytes"},
		{"not json", frame("echo"), "bad microVM boot"},
		{"unknown field", frame(`{"echo":true,"shell":"/bin/sh"}`), "shell"},
		{"trailing data", frame(`{"echo":true}{}`), "bad microVM boot"},
		{"nothing asked", frame(`{}`), "root tag"},
		{"echo and box", frame(`{"echo":true,"root":"root"}`), "names a box too"},
		{"bad tag", frame(`{"root":"root,x","scratch":"s","cache":"none","hostname":"h"}`), `holds ','`},
		{"long tag", frame(`{"root":"` + strings.Repeat("a", 32) + `","scratch":"s","cache":"none","hostname":"h"}`), "1-31 bytes"},
		{"no host name", frame(`{"root":"r","scratch":"s","cache":"none"}`), "host name"},
		{"bad cache", frame(`{"root":"r","scratch":"s","cache":"always","hostname":"h"}`), "cache mode"},
		{"relative dir", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","scratch_dirs":{"tmp":"tmp"}}`), "clean absolute"},
		{"dotdot dir", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","scratch_dirs":{"tmp":"/a/../tmp"}}`), "clean absolute"},
		{"dir over root", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","scratch_dirs":{"tmp":"/"}}`), "over the root"},
		{"name with slash", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","scratch_dirs":{"../x":"/x"}}`), "plain name"},
		{"no memory limit", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h"}`), "memory limit 0 bytes is not 4194304-1099511627776"},
		{"memory limit too small", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","memory_bytes":4194303}`), "memory limit 4194303 bytes"},
		{"memory limit too large", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","memory_bytes":1099511627777}`), "memory limit 1099511627777 bytes"},
		{"negative memory limit", frame(`{"root":"r","scratch":"s","cache":"none","hostname":"h","memory_bytes":-1}`), "memory limit -1 bytes"},
		{"echo with a memory limit", frame(`{"echo":true,"memory_bytes":268435456}`), "names a box too"},
	}
	for _, tt := range tests {
		_, err := ReadBoot(bytes.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ReadBoot = %v, want an error containing %q", tt.name, err, tt.want)
			continue
		}
		if strings.ContainsAny(err.Error(), "\x1b\n") {
			t.Errorf("%s: error %q carries control characters", tt.name, err)
		}
	}
}

// TestMarshalRefuses: the host never sends what the guest would refuse.
func TestMarshalRefuses(t *testing.T) {
	b := goodBoot()
	b.Root = "Root"
	if _, err := b.Marshal(); err == nil {
		t.Error("Marshal of a boot with an upper-case tag succeeded, want the guest's refusal")
	}
}

// FuzzReadBoot: whatever arrives, the parser returns without panicking,
// reads at most one message, and accepts only what Marshal would send.
func FuzzReadBoot(f *testing.F) {
	good, err := goodBoot().Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add(bootFrame(Version, 2, "{}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		r := bytes.NewReader(in)
		b, err := ReadBoot(r)
		if err != nil {
			return
		}
		if _, err := b.Marshal(); err != nil {
			t.Errorf("accepted %+v, which Marshal refuses: %v", b, err)
		}
		if read := len(in) - r.Len(); read > len(bootMagic)+8+MaxBoot {
			t.Fatalf("read %d bytes, over one message", read)
		}
	})
}
