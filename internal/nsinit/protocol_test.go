package nsinit

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConfigFrame checks that a Config survives the wire and that reading
// it consumes exactly its frame: the byte after it carries descriptors and
// must be left for recvmsg.
func TestConfigFrame(t *testing.T) {
	testConfigFrame(t, Config{Command: []string{"python3", "-c", "print(1)"}, Env: []string{"A=b"}, AwaitCgroup: true, DiskBytes: 1 << 20})
	// gVisor's session over the stream, served by the user's agent.
	testConfigFrame(t, Config{Session: true, Boxed: true, Stream: true, HideAgent: true, KernelSysinfo: true})
}

// testConfigFrame checks that want comes through the wire unchanged.
func testConfigFrame(t *testing.T, want Config) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteConfig(&buf, want); err != nil {
		t.Fatal(err)
	}
	buf.WriteByte(1)
	got, err := readConfig(&buf)
	if err != nil {
		t.Fatalf("readConfig() = %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config changed on the wire (-want +got):\n%s", diff)
	}
	if rest, _ := io.ReadAll(&buf); !bytes.Equal(rest, []byte{1}) {
		t.Errorf("after the frame %q remained, want exactly the next byte", rest)
	}
}

func TestConfigFrameErrors(t *testing.T) {
	head := func(version uint32, body string) string {
		return string(binary.BigEndian.AppendUint32(configMagic[:], version)) + body
	}
	frame := func(body string) string {
		return head(Version, string(binary.BigEndian.AppendUint32(nil, uint32(len(body))))+body)
	}
	huge := head(Version, string(binary.BigEndian.AppendUint32(nil, maxConfig+1)))
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "EOF"},
		{"short head", "WDN", "unexpected EOF"},
		{"short length", head(Version, "\x00\x00"), "unexpected EOF"},
		{"short body", head(Version, "\x00\x00\x00\x10{}"), "unexpected EOF"},
		{"too large", huge, "larger than"},
		{"not json", frame("abc"), "invalid character"},
		{"unversioned, from an older warden", "\x00\x00\x00\x02{}", "from a warden from before protocol versioning: reinstall warden-init from the same build as warden"},
		{"older version", head(Version-1, ""), fmt.Sprintf("speaks protocol version %d but warden sent version %d: reinstall warden-init", Version, Version-1)},
		{"newer version", head(Version+1, ""), fmt.Sprintf("speaks protocol version %d but warden sent version %d: reinstall warden-init", Version, Version+1)},
		{"unknown field", frame(`{"command":["true"],"no_such_setting":true}`), `unknown field "no_such_setting"`},
		{"two values", frame(`{}{}`), "more than one JSON value"},
		{"agent hidden on the host's kernel", frame(`{"command":["true"],"hide_agent":true}`), "only gVisor boxes may hide the agent"},
		{"stream outside a session", frame(`{"command":["true"],"stream":true}`), "only a session's agent serves the stream"},
		{"OOM reports from a native session", frame(`{"session":true,"memory_events":true}`), "only a microVM guest's agent has its box's memory.events"},
		{"OOM reports from a one-shot box", frame(`{"command":["true"],"boxed":true,"memory_events":true}`), "only a microVM guest's agent has its box's memory.events"},
	}
	for _, tt := range tests {
		_, err := readConfig(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: readConfig() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}
