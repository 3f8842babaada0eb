package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"

	"github.com/warden-sandbox/warden/internal/nsinit"
)

// serverName is the full warden binary, installed next to warden by
// `make build`. warden itself is built with the slim tag, which leaves out
// the commands that serve (serve, mcp, session) and with them the HTTP
// server, MCP, E2B, protobuf and connect, and template pull and import
// and with them go-containerregistry's registry client, image formats,
// compressors and Docker credential helpers: every `warden run` would pay
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

	templatePullShort   = "Pull an image from a registry as a template (credentials: the Docker config file)"
	templateImportShort = "Import a docker save archive, an OCI layout directory or a tar of one"
)

// serverBinary opens the serverName next to the executable exe for
// exec (nsinit.OpenTrusted), refused unless no one but root or this user
// can change it or put another file in its place: it runs with the
// caller's rights whenever they serve.
func serverBinary(exe, command string) (*os.File, error) {
	p := filepath.Join(filepath.Dir(exe), serverName)
	f, err := nsinit.OpenTrusted(p)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s: %s is not installed next to warden (%s): run make build, or install bin/ whole", command, serverName, p)
	case errors.Is(err, nsinit.ErrUntrusted):
		return nil, fmt.Errorf("%s: %w: %s must be a file (not a symlink), executable and owned by root or this user, in a directory owned by one of them, neither writable by group or others: reinstall warden where that holds", command, err, serverName)
	case err != nil:
		return nil, fmt.Errorf("%s: %w", command, err)
	}
	return f, nil
}

// handoffEnv carries the build of the warden that hands a command over to
// the serverName it executes: the two are one program built twice, and a
// warden-server of another build may disagree with warden on flags,
// state and the init's protocol, so it refuses to run (checkHandoff).
const handoffEnv = "WARDEN_HANDOFF_VERSION"

// buildVersion names this build: the version set at build time and the
// VCS revision the go tool stamps, which `make build` gives both binaries
// alike.
func buildVersion() string {
	v := version
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" || (s.Key == "vcs.modified" && s.Value == "true") {
				v += "+" + s.Value
			}
		}
	}
	return v
}

// checkHandoff runs first in every warden: it removes handoffEnv from the
// environment, so nothing this process starts inherits it, and refuses to
// go on when the warden that handed this process its command is of
// another build.
func checkHandoff() error {
	from, ok := os.LookupEnv(handoffEnv)
	if !ok {
		return nil
	}
	if err := os.Unsetenv(handoffEnv); err != nil {
		return fmt.Errorf("removing %s from the environment: %w", handoffEnv, err)
	}
	if this := buildVersion(); from != this {
		return fmt.Errorf("%s is build %q but the warden that handed it this command is build %q: reinstall bin/ whole from one build", serverName, this, from)
	}
	return nil
}

// handoffEnviron is this process's environment with handoffEnv set to
// this build, for the serverName it hands a command to.
func handoffEnviron() []string {
	env := []string{handoffEnv + "=" + buildVersion()}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, handoffEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}
