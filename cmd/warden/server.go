package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// serverName is the full warden binary, installed next to warden by
// `make build`. warden itself is built with the slim tag, which leaves out
// the commands that serve (serve, mcp, session) and with them the HTTP
// server, MCP, E2B, protobuf and connect: every `warden run` would pay
// their package init and page faults, and a run never uses them. Those
// commands are handed to serverName, which is the same program built
// whole. A build without the tag (go build, go run, the tests) holds
// every command and needs no serverName.
const serverName = "warden-server"

// The one-line help of each command the slim build hands to serverName,
// shared by the full commands and the slim build's stand-ins so that
// `warden --help` reads the same from both.
const (
	serveShort   = "Serve the HTTP API: sessions, execs, files, one-shot runs"
	sessionShort = "Create, use and remove sessions on a running warden serve"
	mcpShort     = "Serve sandboxes to an AI agent over the Model Context Protocol (stdio)"
)

// serverBinary is the serverName next to the executable exe, refused
// unless it is trusted as an init is (nsinit.Trusted): it runs with the
// caller's rights whenever they serve.
func serverBinary(exe, command string) (string, error) {
	p := filepath.Join(filepath.Dir(exe), serverName)
	_, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("%s: %s is not installed next to warden (%s): run make build, or install bin/ whole", command, serverName, p)
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", command, err)
	}
	if !nsinit.Trusted(p) {
		return "", fmt.Errorf("%s: %s must be an executable owned by root or this user, and neither it nor its directory writable by group or others: reinstall warden where that holds", command, p)
	}
	return p, nil
}
