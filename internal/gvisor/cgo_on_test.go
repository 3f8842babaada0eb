//go:build cgo

package gvisor

// cgoOn says this test binary links cgo, under which Go refuses
// AllThreadsSyscall: a box's agent, which this binary is, could then not
// lock down its threads (it exits 114), so live boxes need CGO_ENABLED=0,
// as warden itself is built.
const cgoOn = true
