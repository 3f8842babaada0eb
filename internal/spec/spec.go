// Package spec holds the plain data that flows through Warden: what to run
// (Spec), under which limits (Limits) and network policy (NetworkPolicy), and
// what happened (Result). It has no syscalls, so the API, SDK and CLI can
// share it on any platform, and every front end validates input the same way.
package spec

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// Spec describes one sandboxed program run.
type Spec struct {
	// Command is the program and its arguments, looked up on the sandbox's PATH.
	Command []string
	// Env holds extra KEY=VALUE pairs on top of Warden's clean base
	// environment; nothing of the host's environment is passed in.
	Env []string
	// Workspace is a host directory mounted read-write at /workspace. Empty
	// means a private tmpfs that vanishes with the sandbox.
	Workspace string
	// Scratch is a host tmpfs Warden made, with the directories of
	// rootfs.ScratchDirs in it, that the sandbox takes for all its writable
	// space (/workspace, /tmp, HOME, /dev/shm) instead of a tmpfs of its
	// own: DiskBytes still bounds them together, and the files outlive the
	// sandbox (a session's persistent workspace). Not with Workspace.
	Scratch string
	// Limits bound what the program may consume.
	Limits Limits
	// Network says what the program may reach.
	Network NetworkPolicy
	// Root is the read-only root tree the program runs on: the host's
	// (the zero Root) or a template's.
	Root Root
}

// NetMode selects how a sandbox reaches the network.
type NetMode string

const (
	// NetNone gives the sandbox only a loopback interface: no route anywhere.
	NetNone NetMode = "none"
	// NetProxy routes traffic through Warden's egress proxy and its allowlist.
	NetProxy NetMode = "proxy"
)

// NetworkPolicy is the network part of a Spec.
type NetworkPolicy struct {
	Mode NetMode
	// Allow and Deny are HOST[:PORT] rules for NetProxy: exact names,
	// *.example.com wildcards or IP literals; a port defaults to 80 and
	// 443. A Deny rule wins over every Allow rule.
	Allow []string
	Deny  []string
}

// ErrInvalid marks every validation error, so callers can map them to a
// "bad request" answer without string matching.
var ErrInvalid = errors.New("invalid spec")

// Validate reports the first problem in s as one line that names the field
// and how to fix it. It does not touch the host: whether a workspace exists
// or a limit can be enforced is the backend's concern.
func (s *Spec) Validate() error {
	if len(s.Command) == 0 || s.Command[0] == "" {
		return invalid("no command given: put it after --, e.g. warden run -- python3 -c 'print(1)'")
	}
	return s.ValidateSandbox()
}

// ValidateSandbox checks everything but the command: what a session, which
// gets its commands later, is built from.
func (s *Spec) ValidateSandbox() error {
	if err := ValidateEnv(s.Env); err != nil {
		return err
	}
	if s.Workspace != "" && !path.IsAbs(s.Workspace) {
		return invalid("workspace %q is not an absolute path", s.Workspace)
	}
	if s.Scratch != "" && (!path.IsAbs(s.Scratch) || s.Workspace != "") {
		return invalid("scratch %q must be an absolute path, and without a workspace", s.Scratch)
	}
	if err := s.Limits.Validate(); err != nil {
		return err
	}
	if err := s.Root.Validate(); err != nil {
		return err
	}
	return s.Network.Validate()
}

// ValidateEnv checks KEY=VALUE pairs.
func ValidateEnv(env []string) error {
	for _, kv := range env {
		if err := validateEnv(kv); err != nil {
			return err
		}
	}
	return nil
}

func validateEnv(kv string) error {
	name, _, ok := strings.Cut(kv, "=")
	if !ok {
		return invalid("env %q is not KEY=VALUE", kv)
	}
	if name == "" || strings.ContainsAny(name, "\x00") || strings.ContainsRune(kv, 0) {
		return invalid("env %q has an empty name or a NUL byte", kv)
	}
	return nil
}

// Validate checks the policy's mode and rules.
func (n *NetworkPolicy) Validate() error {
	switch n.Mode {
	case NetNone:
		if len(n.Allow) > 0 || len(n.Deny) > 0 {
			return invalid("--allow and --deny need --net proxy; with --net none nothing is reachable")
		}
	case NetProxy:
		for _, a := range append(append([]string(nil), n.Allow...), n.Deny...) {
			if a == "" || strings.ContainsAny(a, " /\x00") {
				return invalid("network rule %q is not HOST[:PORT]", a)
			}
		}
	default:
		return invalid("network mode %q is unknown: use none or proxy", n.Mode)
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalid, fmt.Sprintf(format, args...))
}
