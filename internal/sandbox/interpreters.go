package sandbox

import (
	"context"
	"fmt"
	"strings"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Bounds on named interpreters (ExecRequest.Interpreter), which front ends
// such as E2B's code contexts create on a client's word: each is a process
// in the sandbox and pipes and goroutines in the host once it runs.
const (
	// MaxNamedInterpreters caps the named interpreters of one session,
	// all languages together; the default ones do not count. Front ends
	// that create them (E2B's code contexts) take their own cap from it,
	// and DescriptorsPerSandbox counts their descriptors.
	MaxNamedInterpreters = 32
	// maxInterpreterName is the longest name.
	maxInterpreterName = 64
)

// interpKey is the key of language's interpreter called name in
// session.interps. The default one is keyed by the language alone; no
// language has a "/" in its name, so the two never meet.
func interpKey(language, name string) string {
	if name == "" {
		return language
	}
	return language + "/" + name
}

// validInterpreterName checks a name a client chose: empty (the default
// interpreter), or up to maxInterpreterName letters, digits, '-' and '_',
// so it is safe in keys, logs and error messages.
func validInterpreterName(name string) error {
	if len(name) > maxInterpreterName {
		return fmt.Errorf("%w: interpreter name of %d bytes is too long: use at most %d", spec.ErrInvalid, len(name), maxInterpreterName)
	}
	for _, c := range name {
		ok := 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_'
		if !ok {
			return fmt.Errorf("%w: interpreter name %q may hold only letters, digits, '-' and '_'", spec.ErrInvalid, name)
		}
	}
	return nil
}

// roomForInterpreter says whether the session may make another
// interpreter called name; s.mu is held.
func (s *session) roomForInterpreter(name string) error {
	if name == "" {
		return nil
	}
	named := 0
	for key := range s.interps {
		if strings.Contains(key, "/") {
			named++
		}
	}
	if named >= MaxNamedInterpreters {
		return fmt.Errorf("%w: session %s already has %d named interpreters: reset one before starting another", spec.ErrInvalid, s.id, named)
	}
	return nil
}

// ResetInterpreter kills owner's session's interpreter of language called
// name ("" for the default one) and forgets it with its state: the next
// exec on it starts a fresh process, and until then it costs nothing and
// does not count against the session's named interpreters. A run in
// progress on it ends as a restarted interpreter. One never used is
// nothing to reset and no error; a session that is dead or ending answers
// why. A paused session is resumed first, as an exec resumes it. ctx
// ends the waits for an attach and a resume.
func (m *Manager) ResetInterpreter(ctx context.Context, owner, id, language, name string) error {
	if err := validInterpreterName(name); err != nil {
		return err
	}
	s, err := m.lookupCtx(ctx, owner, id)
	if err != nil {
		return err
	}
	// Ending the interpreter needs its box running: in a frozen one it
	// could not end, and the reset would wait out its exit grace.
	ctx, cancel := context.WithTimeout(ctx, resumeWait)
	defer cancel()
	if err := m.resumeIfPaused(ctx, s); err != nil {
		return err
	}
	s.mu.Lock()
	state := s.state
	key := interpKey(language, name)
	in := s.interps[key]
	delete(s.interps, key)
	delete(s.interpProcs, key)
	s.mu.Unlock()
	switch state {
	case StateDead:
		return s.deadError()
	case StateStopping, StateGone:
		return fmt.Errorf("%w: session %s is %s", ErrClosed, id, state)
	}
	if in == nil {
		return nil
	}
	if err := in.Close(); err != nil {
		return fmt.Errorf("closing the %s interpreter %q of session %s: %w", language, name, id, err)
	}
	return nil
}
