package nsinit

import (
	"bytes"
	"encoding/binary"
	"io"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConfigFrame checks that a Config survives the wire and that reading
// it consumes exactly its frame: the byte after it carries descriptors and
// must be left for recvmsg.
func TestConfigFrame(t *testing.T) {
	want := Config{Command: []string{"python3", "-c", "print(1)"}, Env: []string{"A=b"}, AwaitCgroup: true, DiskBytes: 1 << 20}
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
	huge := binary.BigEndian.AppendUint32(nil, maxConfig+1)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "EOF"},
		{"short length", "\x00\x00", "unexpected EOF"},
		{"short body", "\x00\x00\x00\x10{}", "unexpected EOF"},
		{"too large", string(huge), "larger than"},
		{"not json", "\x00\x00\x00\x03abc", "invalid character"},
	}
	for _, tt := range tests {
		_, err := readConfig(strings.NewReader(tt.in))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: readConfig() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}
