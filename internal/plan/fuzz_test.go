package plan

import (
	"reflect"
	"testing"
)

// decodeSeeds are FuzzDecode's seeds, which TestDecodeAsGo also feeds to
// warden-exec's decoder: an empty plan and an op of bad counts (the
// sample plan is added by each).
var decodeSeeds = [][]byte{
	[]byte("WPLN\x02\x00\x00\x00\x00\x00\x00\x00"),
	[]byte("WPLN\x02\x00\x00\x00\x01\x00\x00\x00\x0a\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\xff\xff\xff\xff"),
}

// FuzzDecode checks that Decode never panics or reads past its input, and
// that what it accepts encodes back to the same bytes.
func FuzzDecode(f *testing.F) {
	if b, err := Encode(sample()); err == nil {
		f.Add(b)
	}
	for _, b := range decodeSeeds {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Decode(b)
		if err != nil {
			return
		}
		again, err := Encode(p)
		if err != nil {
			t.Fatalf("Encode of a decoded plan: %v", err)
		}
		if !reflect.DeepEqual(again, b) {
			t.Fatalf("Encode(Decode(b)) = %q, want %q", again, b)
		}
	})
}
