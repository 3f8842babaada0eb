// Package podinit is Warden's init as a Kubernetes Pod's process: it
// listens for the router on the Pod's network (Port), lets in only the
// router that proves the Pod's key, and serves each admitted connection
// with the same boxed agent a microVM serves over its serial port (the
// agent protocol over a streammux stream). The host side is
// internal/poddial, apart so that warden-init links none of it.
// docs/kubernetes.md ("The sandbox Pod's agent")
// has the design and the threat model.
package podinit

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
)

// Arg, as warden-init's first argument, starts the pod mode:
// "warden-init pod [--listen ADDR]" (Linux only).
const Arg = "pod"

// Port is the TCP port a sandbox Pod's init listens on, the agent port of
// the default SandboxTemplate and the NetworkPolicies in deploy/.
const Port = 7070

// The handshake, before anything else on the connection: the init sends
// its hello (magic and a fresh nonce); the router answers with a public
// key and its signature over sigContext, the nonce, the key and the
// address it reached (host:port); the init answers with one byte. The
// address binds a proof to the Pod the router meant: a peer the router
// dialed by mistake cannot relay a Pod's nonce and have the router's
// signature admitted there (Pod-to-Pod traffic is not translated, so the
// router's peer address is the init's local one). Every message has a fixed size, so neither side
// reads more than the other owes.
const (
	magic      = "warden-pod/1\n"
	nonceSize  = 32
	helloSize  = len(magic) + nonceSize
	proofSize  = ed25519.PublicKeySize + ed25519.SignatureSize
	sigContext = "warden pod adoption v2\x00"
	keyContext = "warden pod key v1\x00"
)

// The init's answer to a proof.
const (
	answerAdopted  byte = 'A'
	answerReturned byte = 'R'
	answerTaken    byte = 'T'
	answerBadProof byte = 'B'
)

// MinRouterKey is the least routerKey Key takes: 256 bits.
const MinRouterKey = 32

// Adoption says how an admitted connection's key stands with the Pod.
type Adoption int

const (
	// Adopted is the Pod's first admission: the key owns it from now on.
	Adopted Adoption = iota + 1
	// Returned is a later admission of the key that owns the Pod (a
	// router replica taking over a session).
	Returned
)

// String names the adoption for logs.
func (a Adoption) String() string {
	switch a {
	case Adopted:
		return "adopted"
	case Returned:
		return "returned"
	}
	return fmt.Sprintf("Adoption(%d)", int(a))
}

// ErrTaken is the refusal of a key when another one owns the Pod: the
// router must never run a session there, and should report the Pod.
var ErrTaken = errors.New("the Pod was adopted by another key")

// ErrBadProof is the refusal of a signature that does not verify.
var ErrBadProof = errors.New("the key's signature over the Pod's nonce and address does not verify")

// ErrNotPodInit is a peer whose hello is not a Warden Pod init's.
var ErrNotPodInit = errors.New("the peer is not a Warden Pod init")

// Key is the Pod's key for the router: an Ed25519 key whose seed is
// HMAC-SHA256(routerKey, the Pod's UID). Every router replica holding
// routerKey derives the same key for a Pod, and no one without it can,
// so the Pods of a warm pool (identical specs, no per-Pod secret) still
// each get a key of their own.
func Key(routerKey []byte, podUID string) (ed25519.PrivateKey, error) {
	if len(routerKey) < MinRouterKey {
		return nil, fmt.Errorf("the router key has %d bytes; it needs at least %d random ones", len(routerKey), MinRouterKey)
	}
	if podUID == "" {
		return nil, errors.New("deriving a Pod's key: the Pod's UID is empty; use metadata.uid of the claimed Pod")
	}
	m := hmac.New(sha256.New, routerKey)
	m.Write([]byte(keyContext + podUID))
	return ed25519.NewKeyFromSeed(m.Sum(nil)), nil
}

// Owner is the init's memory of the key that adopted its Pod, held in
// memory only: a public key, nothing secret. Its zero value is a Pod
// nobody adopted yet.
type Owner struct {
	key ed25519.PublicKey
}

// Admit runs the init's side of the handshake on rw, reached at addr
// (the connection's local address, host:port): it sends a hello with a
// nonce from rand, reads the peer's proof (exactly proofSize bytes,
// whatever the peer sends) and answers it; the proof must sign addr. The first key whose
// proof verifies adopts the Pod; later ones must be that key. Deadlines
// are the caller's.
func (o *Owner) Admit(rw io.ReadWriter, rand io.Reader, addr string) (Adoption, error) {
	hello := make([]byte, helloSize)
	copy(hello, magic)
	nonce := hello[len(magic):]
	if _, err := io.ReadFull(rand, nonce); err != nil {
		return 0, fmt.Errorf("making a nonce: %w", err)
	}
	if _, err := rw.Write(hello); err != nil {
		return 0, fmt.Errorf("sending the hello: %w", err)
	}
	proof := make([]byte, proofSize)
	if _, err := io.ReadFull(rw, proof); err != nil {
		return 0, fmt.Errorf("reading the proof: %w", err)
	}
	pub := ed25519.PublicKey(proof[:ed25519.PublicKeySize])
	answer, adoption, refusal := o.judge(pub, signed(nonce, pub, addr), proof[ed25519.PublicKeySize:])
	if _, err := rw.Write([]byte{answer}); err != nil {
		if refusal == nil {
			return 0, fmt.Errorf("sending the answer: %w", err)
		}
		return 0, fmt.Errorf("%w (and sending the answer: %w)", refusal, err)
	}
	if refusal != nil {
		return 0, refusal
	}
	if adoption == Adopted {
		o.key = pub
	}
	return adoption, nil
}

// judge is Admit's verdict on a proof.
func (o *Owner) judge(pub ed25519.PublicKey, msg, sig []byte) (byte, Adoption, error) {
	if !ed25519.Verify(pub, msg, sig) {
		return answerBadProof, 0, ErrBadProof
	}
	switch {
	case o.key == nil:
		return answerAdopted, Adopted, nil
	case subtle.ConstantTimeCompare(pub, o.key) == 1:
		return answerReturned, Returned, nil
	}
	return answerTaken, 0, ErrTaken
}

// adopted says a key owns the Pod.
func (o *Owner) adopted() bool { return o.key != nil }

// signed is what a proof signs: the context, the init's nonce, the
// public key and the address the router reached, the last field, so the
// rest fixes where it starts.
func signed(nonce []byte, pub ed25519.PublicKey, addr string) []byte {
	msg := make([]byte, 0, len(sigContext)+len(nonce)+len(pub)+len(addr))
	msg = append(msg, sigContext...)
	msg = append(msg, nonce...)
	msg = append(msg, pub...)
	return append(msg, addr...)
}

// Present runs the router's side of the handshake on rw, connected to
// addr (the connection's remote address, host:port): it reads the init's
// hello, sends key's public half and its signature over the hello's
// nonce and addr, and reads the answer. Deadlines are the caller's.
func Present(rw io.ReadWriter, key ed25519.PrivateKey, addr string) (Adoption, error) {
	if len(key) != ed25519.PrivateKeySize {
		return 0, fmt.Errorf("the Pod's key has %d bytes, not an Ed25519 key's %d: derive it with Key", len(key), ed25519.PrivateKeySize)
	}
	hello := make([]byte, helloSize)
	if _, err := io.ReadFull(rw, hello); err != nil {
		return 0, fmt.Errorf("reading the Pod's hello: %w", err)
	}
	if string(hello[:len(magic)]) != magic {
		return 0, fmt.Errorf("%w: its hello begins %q, not %q", ErrNotPodInit, hello[:len(magic)], magic)
	}
	pub := key.Public().(ed25519.PublicKey)
	proof := append(append(make([]byte, 0, proofSize), pub...), ed25519.Sign(key, signed(hello[len(magic):], pub, addr))...)
	if _, err := rw.Write(proof); err != nil {
		return 0, fmt.Errorf("sending the proof: %w", err)
	}
	var answer [1]byte
	if _, err := io.ReadFull(rw, answer[:]); err != nil {
		return 0, fmt.Errorf("reading the Pod's answer: %w", err)
	}
	switch answer[0] {
	case answerAdopted:
		return Adopted, nil
	case answerReturned:
		return Returned, nil
	case answerTaken:
		return 0, ErrTaken
	case answerBadProof:
		return 0, ErrBadProof
	}
	return 0, fmt.Errorf("%w: its answer is byte %#x", ErrNotPodInit, answer[0])
}
