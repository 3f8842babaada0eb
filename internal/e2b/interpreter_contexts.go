package e2b

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// A code context is E2B's name for one interpreter state: the Jupyter
// kernel its server runs per context. Here the default context of a
// language is the session's own interpreter of that language (what
// Warden's exec API runs code in too), and every context a client creates
// is a separate named interpreter of the session (ExecRequest.Interpreter,
// named by the context id), so its variables are its own.

// Bounds and defaults of code contexts.
const (
	// maxCodeContexts caps the contexts a client may create in one sandbox,
	// as the session caps its named interpreters: each is an interpreter
	// process once it runs.
	maxCodeContexts = sandbox.MaxNamedInterpreters
	// defaultCodeLanguage is what a request that names no language runs.
	defaultCodeLanguage = "python"
)

// defaultContextLanguages are the languages whose default context every
// sandbox lists from the start, as E2B's server starts with a Python and
// a JavaScript kernel; others (bash) are listed once used.
var defaultContextLanguages = []string{"python", "javascript"}

// codeContext is one context of one sandbox.
type codeContext struct {
	// id is what E2B's API calls it; named contexts use it as the name
	// of their interpreter.
	id string
	// language is the interpreter's language (interp's name for it).
	language string
	// cwd is the working directory as the client gave it (E2B's path),
	// and dir the same inside the box.
	cwd, dir string
	// named says this context has its own interpreter (id); the default
	// ones run in the session's interpreter of their language.
	named bool
	// moved says the interpreter runs in dir: false until a chdir has
	// run in the current interpreter process, and again after it died or
	// was reset. A context whose dir is the box's default is never moved.
	moved bool
	// count is the execution count of the context (Jupyter's
	// execution_count), from 1, reset with the interpreter.
	count int
}

// interpreterName is the name ExecRequest.Interpreter takes for c.
func (c *codeContext) interpreterName() string {
	if c.named {
		return c.id
	}
	return ""
}

// needsChdir says a run must move the interpreter to c.dir first.
func (c *codeContext) needsChdir() bool {
	return c.dir != boxHome && !c.moved
}

// boxContexts are the contexts of one sandbox, in the order they were
// made (E2B lists them so).
type boxContexts struct {
	owner string
	// turn is held by the one request that runs code in this sandbox
	// through this API: a session runs one exec at a time, and E2B's
	// server queues executions rather than refusing them.
	turn chan struct{}
	list []*codeContext
}

// contextRegistry holds the contexts of every sandbox that used the code
// interpreter. mu guards the registry and every codeContext in it.
type contextRegistry struct {
	sessions sandbox.Sessions
	mu       sync.Mutex
	boxes    map[string]*boxContexts
}

func newContextRegistry(sessions sandbox.Sessions) *contextRegistry {
	return &contextRegistry{sessions: sessions, boxes: map[string]*boxContexts{}}
}

// box returns sb's contexts, made with the default ones on first use.
// Making one first drops those of sandboxes whose session is gone, so the
// registry holds no more than the live sandboxes that used it. That
// sweep asks the sessions outside mu: a lookup may wait (on a remote
// backend it may reach the cluster), and it must not hold every other
// sandbox's code contexts meanwhile.
func (g *contextRegistry) box(sb *Sandbox) *boxContexts {
	g.mu.Lock()
	if b, ok := g.boxes[sb.ID]; ok && b.owner == sb.Owner {
		g.mu.Unlock()
		return b
	}
	known := make(map[string]*boxContexts, len(g.boxes))
	for id, b := range g.boxes {
		known[id] = b
	}
	g.mu.Unlock()
	gone := g.goneOf(known)
	g.mu.Lock()
	defer g.mu.Unlock()
	for id, b := range gone {
		if g.boxes[id] == b {
			delete(g.boxes, id)
		}
	}
	if b, ok := g.boxes[sb.ID]; ok && b.owner == sb.Owner {
		return b // made by another request meanwhile
	}
	b := &boxContexts{owner: sb.Owner, turn: make(chan struct{}, 1)}
	for _, lang := range defaultContextLanguages {
		b.list = append(b.list, &codeContext{id: newContextID(), language: lang, cwd: e2bHome, dir: boxHome})
	}
	g.boxes[sb.ID] = b
	return b
}

// goneOf is the entries of known whose session no longer exists, each
// looked up within sweepLookupWait.
func (g *contextRegistry) goneOf(known map[string]*boxContexts) map[string]*boxContexts {
	gone := map[string]*boxContexts{}
	for id, b := range known {
		ctx, cancel := context.WithTimeout(context.Background(), sweepLookupWait)
		_, err := g.sessions.Get(ctx, b.owner, id) // a sweep of no request's
		cancel()
		if errors.Is(err, sandbox.ErrNotFound) {
			gone[id] = b
		}
	}
	return gone
}

// sweepLookupWait bounds each lookup of the sweep: an entry whose lookup
// takes longer is kept, and looked up again at the next sweep.
const sweepLookupWait = 5 * time.Second

// byID is sb's context called id, or nil.
func (g *contextRegistry) byID(sb *Sandbox, id string) *codeContext {
	b := g.box(sb)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range b.list {
		if c.id == id {
			return c
		}
	}
	return nil
}

// defaultFor is sb's default context of language, made (and listed) if
// the client has not used or has removed it.
func (g *contextRegistry) defaultFor(sb *Sandbox, language string) *codeContext {
	b := g.box(sb)
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range b.list {
		if !c.named && c.language == language {
			return c
		}
	}
	c := &codeContext{id: newContextID(), language: language, cwd: e2bHome, dir: boxHome}
	b.list = append(b.list, c)
	return c
}

// add lists a new named context of sb, unless sb has maxCodeContexts.
func (g *contextRegistry) add(sb *Sandbox, c *codeContext) error {
	b := g.box(sb)
	g.mu.Lock()
	defer g.mu.Unlock()
	named := 0
	for _, c := range b.list {
		if c.named {
			named++
		}
	}
	if named >= maxCodeContexts {
		return fmt.Errorf("this sandbox already has %d contexts: remove one before creating another", named)
	}
	b.list = append(b.list, c)
	return nil
}

// remove unlists sb's context c.
func (g *contextRegistry) remove(sb *Sandbox, c *codeContext) {
	b := g.box(sb)
	g.mu.Lock()
	defer g.mu.Unlock()
	for i, x := range b.list {
		if x == c {
			b.list = append(b.list[:i], b.list[i+1:]...)
			return
		}
	}
}

// listing is sb's contexts as E2B lists them.
func (g *contextRegistry) listing(sb *Sandbox) []contextJSON {
	b := g.box(sb)
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]contextJSON, 0, len(b.list))
	for _, c := range b.list {
		out = append(out, contextJSON{ID: c.id, Language: c.language, Cwd: c.cwd})
	}
	return out
}

// reset records that c's interpreter starts afresh: back in the box's
// default directory, its count from the start.
func (g *contextRegistry) reset(c *codeContext) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c.moved, c.count = false, 0
}

// newContextID is a random id shaped like the Jupyter kernel ids E2B's
// contexts have (a UUID v4), which is also a valid interpreter name.
func newContextID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (it panics instead)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// contextLanguage maps the language a client names to the interpreter
// that runs it: E2B's server lower-cases and trims it, takes "js" for
// JavaScript and an empty one for Python. It fails, saying which are
// served, for the rest.
func contextLanguage(lang string) (string, error) {
	l := strings.ToLower(strings.TrimSpace(lang))
	switch l {
	case "":
		return defaultCodeLanguage, nil
	case "js":
		return "javascript", nil
	case "ts", "typescript":
		return "", fmt.Errorf("language %q: TypeScript is not served yet (the sandbox's Node.js runs JavaScript only): use javascript", interpQuote(lang, 64))
	}
	if interp.Known(l) {
		return l, nil
	}
	return "", sandbox.UnknownLanguage(lang)
}
