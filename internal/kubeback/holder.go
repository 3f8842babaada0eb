package kubeback

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// holderContext separates a holder's proof from the router key's other
// uses (owner labels, Pods' keys).
const holderContext = "warden kube holder\x00"

// forwardKeyContext derives ForwardKey from the router key.
const forwardKeyContext = "warden kube forward key\x00"

// ParseAdvertise checks a replica's --kube-advertise address: an IP
// literal and a port (IPv6 in brackets) other replicas can dial, so not
// unspecified, multicast or port 0. "" is allowed: the replica then
// records no holder and is never forwarded to.
func ParseAdvertise(addr string) (netip.AddrPort, error) {
	if addr == "" {
		return netip.AddrPort{}, nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("--kube-advertise %q is not IP:port (e.g. 10.0.0.7:8080, or [fd00::7]:8080): give this replica's Pod IP and API port", addr)
	}
	if a := ap.Addr(); a.IsUnspecified() || a.IsMulticast() || ap.Port() == 0 {
		return netip.AddrPort{}, fmt.Errorf("--kube-advertise %q is no address another replica can dial: give this replica's Pod IP and API port", addr)
	}
	return ap, nil
}

// holderProof is the HMAC, with the router key, of addr as the holder
// of the claim uid: only a replica (which has the key) makes one, and
// it checks for that claim only.
func holderProof(key []byte, uid types.UID, addr string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(holderContext + string(uid) + "\x00" + addr))
	return m.Sum(nil)
}

// holderValue is the holder annotation's value naming addr on the
// claim uid: "addr/proof" (hex).
func holderValue(key []byte, uid types.UID, addr string) string {
	return addr + "/" + hex.EncodeToString(holderProof(key, uid, addr))
}

// errHolderProof is a holder annotation whose proof does not check.
var errHolderProof = errors.New("its proof is not the router key's for this claim")

// holderAddr is the address the holder annotation value v names on the
// claim uid, refusing a value without a good proof: the annotation is
// writable by whoever may patch claims, who must not be able to send a
// tenant's requests (and API key) to an address of their choosing.
func holderAddr(key []byte, uid types.UID, v string) (netip.AddrPort, error) {
	i := strings.LastIndexByte(v, '/')
	if i < 0 {
		return netip.AddrPort{}, fmt.Errorf("holder %q is not address/proof", v)
	}
	addr, proof := v[:i], v[i+1:]
	got, err := hex.DecodeString(proof)
	if err != nil || !hmac.Equal(got, holderProof(key, uid, addr)) {
		return netip.AddrPort{}, fmt.Errorf("holder %q: %w", addr, errHolderProof)
	}
	ap, err := ParseAdvertise(addr)
	if err != nil || !ap.IsValid() {
		return netip.AddrPort{}, fmt.Errorf("holder %q is not an address: %w", addr, err)
	}
	return ap, nil
}
