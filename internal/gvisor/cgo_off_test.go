//go:build !cgo

package gvisor

// cgoOn: see cgo_on_test.go.
const cgoOn = false
