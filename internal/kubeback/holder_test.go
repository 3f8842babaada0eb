package kubeback

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestParseAdvertise(t *testing.T) {
	for _, tt := range []struct {
		in, want string // want "" with ok: none given
		ok       bool
	}{
		{"", "", true},
		{"10.0.0.7:8080", "10.0.0.7:8080", true},
		{"[fd00::7]:8080", "[fd00::7]:8080", true},
		{"10.0.0.7", "", false},
		{"router:8080", "", false},
		{"0.0.0.0:8080", "", false},
		{"[::]:8080", "", false},
		{"10.0.0.7:0", "", false},
		{"224.0.0.1:8080", "", false},
		{"10.0.0.7:8080/x", "", false},
	} {
		got, err := ParseAdvertise(tt.in)
		switch {
		case tt.ok && err != nil:
			t.Errorf("%q: got %v, want %s", tt.in, err, tt.want)
		case tt.ok && tt.want != "" && got.String() != tt.want:
			t.Errorf("%q: got %v, want %s", tt.in, got, tt.want)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), "--kube-advertise") || strings.Contains(err.Error(), "\n")):
			t.Errorf("%q: got %v, %v; want one line naming --kube-advertise", tt.in, got, err)
		}
	}
}

// TestHolderProof: a holder is followed only with the router key's
// proof for that very claim and address.
func TestHolderProof(t *testing.T) {
	key := bytes.Repeat([]byte{1}, 32)
	const uid, addr = types.UID("uid-1"), "10.0.0.7:8080"
	good := holderValue(key, uid, addr)
	other := holderValue(bytes.Repeat([]byte{2}, 32), uid, addr)
	_, proof, _ := strings.Cut(good, "/")
	for _, tt := range []struct {
		name  string
		uid   types.UID
		value string
		proof bool // the error is errHolderProof
	}{
		{"another key's proof", uid, other, true},
		{"another claim's proof", "uid-2", good, true},
		{"another address with the proof", uid, "10.0.0.66:8080/" + proof, true},
		{"no proof", uid, addr, false},
		{"a proof not hex", uid, addr + "/zz", true},
		{"an empty proof", uid, addr + "/", true},
	} {
		if got, err := holderAddr(key, tt.uid, tt.value); err == nil || errors.Is(err, errHolderProof) != tt.proof {
			t.Errorf("%s: got %v, %v; want refused (proof error %v)", tt.name, got, err, tt.proof)
		}
	}
	got, err := holderAddr(key, uid, good)
	if err != nil || got.String() != addr {
		t.Errorf("the good proof: got %v, %v; want %s", got, err, addr)
	}
}
