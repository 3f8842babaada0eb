package podinit

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
)

// testKey derives a Pod's key for tests.
func testKey(t *testing.T, uid string) ed25519.PrivateKey {
	t.Helper()
	k, err := Key(bytes.Repeat([]byte{7}, MinRouterKey), uid)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// podAddr is the address the tests' inits are reached at.
const podAddr = "10.1.1.1:7070"

// handshake runs Admit on one end of a pipe and Present on the other.
func handshake(t *testing.T, o *Owner, key ed25519.PrivateKey) (admitted Adoption, admitErr error, presented Adoption, presentErr error) {
	return handshakeAt(t, o, key, podAddr)
}

// handshakeAt is handshake with the router believing it reached dialed.
func handshakeAt(t *testing.T, o *Owner, key ed25519.PrivateKey, dialed string) (admitted Adoption, admitErr error, presented Adoption, presentErr error) {
	t.Helper()
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		admitted, admitErr = o.Admit(a, rand.Reader, podAddr)
	}()
	presented, presentErr = Present(b, key, dialed)
	<-done
	return
}

func TestAdoption(t *testing.T) {
	mine, theirs := testKey(t, "pod-1"), testKey(t, "pod-2")
	var o Owner
	steps := []struct {
		name string
		key  ed25519.PrivateKey
		want Adoption
		err  error
	}{
		{"first key adopts", mine, Adopted, nil},
		{"same key returns", mine, Returned, nil},
		{"another key is refused", theirs, 0, ErrTaken},
		{"the owner still returns", mine, Returned, nil},
	}
	for _, s := range steps {
		got, aerr, pgot, perr := handshake(t, &o, s.key)
		if got != s.want || !errors.Is(aerr, s.err) {
			t.Errorf("%s: Admit = %v, %v; want %v, %v", s.name, got, aerr, s.want, s.err)
		}
		if pgot != s.want || !errors.Is(perr, s.err) {
			t.Errorf("%s: Present = %v, %v; want %v, %v", s.name, pgot, perr, s.want, s.err)
		}
	}
}

// countingConn counts what the init reads of a peer's bytes.
type countingConn struct {
	io.Reader
	read  int
	wrote bytes.Buffer
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Reader.Read(p)
	c.read += n
	return n, err
}

func (c *countingConn) Write(p []byte) (int, error) { return c.wrote.Write(p) }

func TestAdmitChecksTheAddress(t *testing.T) {
	// A proof signed for the address the router believes it reached
	// (another Pod's, relayed by a peer it dialed by mistake) does not
	// admit it at the init's address.
	for _, tc := range []struct {
		name, dialed string
		want         Adoption
		err          error
	}{
		{"another Pod's address", "10.1.1.2:7070", 0, ErrBadProof},
		{"another port", "10.1.1.1:7071", 0, ErrBadProof},
		{"the init's own address", podAddr, Adopted, nil},
	} {
		var o Owner
		got, aerr, _, perr := handshakeAt(t, &o, testKey(t, "pod-1"), tc.dialed)
		if got != tc.want || !errors.Is(aerr, tc.err) || !errors.Is(perr, tc.err) {
			t.Errorf("%s: Admit = %v, %v and Present's error %v; want %v, %v", tc.name, got, aerr, perr, tc.want, tc.err)
		}
		if o.adopted() != (tc.err == nil) {
			t.Errorf("%s: adopted = %v, want %v", tc.name, o.adopted(), tc.err == nil)
		}
	}
}

func TestAdmitRefusesBadProofs(t *testing.T) {
	key := testKey(t, "pod-1")
	pub := key.Public().(ed25519.PublicKey)
	tests := []struct {
		name string
		peer []byte
		err  string
	}{
		{"garbage", bytes.Repeat([]byte("x"), proofSize), ErrBadProof.Error()},
		{"oversized", bytes.Repeat([]byte{0xff}, 1<<20), ErrBadProof.Error()},
		{"a signature over another nonce", append(append([]byte{}, pub...), ed25519.Sign(key, signed(make([]byte, nonceSize), pub, podAddr))...), ErrBadProof.Error()},
		{"short", []byte("warden"), "reading the proof: unexpected EOF"},
		{"nothing", nil, "reading the proof: EOF"},
	}
	for _, tt := range tests {
		var o Owner
		c := &countingConn{Reader: bytes.NewReader(tt.peer)}
		_, err := o.Admit(c, rand.Reader, podAddr)
		if err == nil || err.Error() != tt.err {
			t.Errorf("%s: Admit error = %v, want %q", tt.name, err, tt.err)
		}
		if c.read > proofSize {
			t.Errorf("%s: the init read %d bytes of the peer's, want at most %d", tt.name, c.read, proofSize)
		}
		if o.adopted() {
			t.Errorf("%s: a refused proof adopted the Pod", tt.name)
		}
	}
}

func TestPresentRefusesOtherPeers(t *testing.T) {
	key := testKey(t, "pod-1")
	tests := []struct {
		name  string
		hello []byte
		err   string
	}{
		{"an HTTP server", []byte("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n"), `the peer is not a Warden Pod init: its hello begins "HTTP/1.1 400 ", not "warden-pod/1\n"`},
		{"a short hello", []byte(magic), "reading the Pod's hello: unexpected EOF"},
		{"a bad answer", append(append([]byte(magic), make([]byte, nonceSize)...), '?'), "the peer is not a Warden Pod init: its answer is byte 0x3f"},
	}
	for _, tt := range tests {
		c := &countingConn{Reader: bytes.NewReader(tt.hello)}
		_, err := Present(c, key, podAddr)
		if err == nil || !strings.HasPrefix(err.Error(), tt.err) {
			t.Errorf("%s: Present error = %v, want one starting %q", tt.name, err, tt.err)
		}
	}
}

func TestKey(t *testing.T) {
	router := bytes.Repeat([]byte{1}, MinRouterKey)
	a, err := Key(router, "uid-a")
	if err != nil {
		t.Fatal(err)
	}
	again, _ := Key(router, "uid-a")
	other, _ := Key(router, "uid-b")
	otherRouter, _ := Key(bytes.Repeat([]byte{2}, MinRouterKey), "uid-a")
	if !a.Equal(again) {
		t.Error("Key of the same router key and UID differs between calls, want the same key")
	}
	if a.Equal(other) || a.Equal(otherRouter) {
		t.Error("Key of another UID or router key is the same key, want another")
	}
	for _, tt := range []struct {
		name   string
		router []byte
		uid    string
		err    string
	}{
		{"short router key", router[:MinRouterKey-1], "uid-a", "the router key has 31 bytes; it needs at least 32 random ones"},
		{"no UID", router, "", "deriving a Pod's key: the Pod's UID is empty; use metadata.uid of the claimed Pod"},
	} {
		if _, err := Key(tt.router, tt.uid); err == nil || err.Error() != tt.err {
			t.Errorf("%s: Key error = %v, want %q", tt.name, err, tt.err)
		}
	}
	if _, err := Present(&countingConn{Reader: bytes.NewReader(nil)}, a[:10], podAddr); err == nil || !strings.Contains(err.Error(), "derive it with Key") {
		t.Errorf("Present with a short key: error = %v, want one saying to derive it with Key", err)
	}
}

// FuzzAdmit feeds any bytes to the init's side of the handshake, for an
// unadopted Pod and an adopted one: it reads at most a proof's bytes,
// answers with at most its hello and one byte, and a proof that does not
// verify never adopts nor returns.
func FuzzAdmit(f *testing.F) {
	key := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize))
	f.Add([]byte{}, false)
	f.Add(bytes.Repeat([]byte{0xff}, proofSize+10), true)
	f.Add(append([]byte(key.Public().(ed25519.PublicKey)), make([]byte, ed25519.SignatureSize)...), false)
	f.Fuzz(func(t *testing.T, peer []byte, adopted bool) {
		var o Owner
		if adopted {
			o.key = key.Public().(ed25519.PublicKey)
		}
		c := &countingConn{Reader: bytes.NewReader(peer)}
		a, err := o.Admit(c, bytes.NewReader(bytes.Repeat([]byte{9}, nonceSize)), podAddr)
		if c.read > proofSize || c.wrote.Len() > helloSize+1 {
			t.Fatalf("read %d bytes and wrote %d, want at most %d and %d", c.read, c.wrote.Len(), proofSize, helloSize+1)
		}
		if err == nil || a != 0 {
			t.Fatalf("Admit of a random proof = %v, %v; want a refusal", a, err)
		}
		if o.adopted() != adopted {
			t.Fatalf("a refused proof changed the Pod's adoption to %v", o.adopted())
		}
	})
}
