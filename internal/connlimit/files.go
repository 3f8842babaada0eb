package connlimit

import (
	"fmt"
	"log/slog"
	"net"
)

// Descriptors the cap leaves for everything but connections and sandboxes.
const (
	// base is what the server holds besides sessions and connections: its
	// listener, logs, state directory, the spawner's pipes, epoll, and
	// the files it opens for a moment.
	base = 256
	// minConns is the fewest connections the cap allows, however low the
	// descriptor limit, so a server on a small limit still serves; a
	// server with more sandboxes keeps one connection for each (floor).
	minConns = 64
)

// Reserve is what a server keeps of its descriptors for its sandboxes.
type Reserve struct {
	// Sandboxes is how many sessions and runs may be alive at once, the
	// ones built ahead included.
	Sandboxes int
	// PerSandbox is how many descriptors one of them may hold in the
	// server at most.
	PerSandbox int
}

// descriptors is the reserve in descriptors, the server's own included.
func (r Reserve) descriptors() uint64 {
	return base + uint64(max(r.PerSandbox, 0))*uint64(max(r.Sandboxes, 0))
}

// capFor is how many connections a server may hold under a descriptor
// limit of nofile while keeping r for the rest: nofile minus r, and never
// fewer than r.floor(). need is the limit that keeps r whole beside that
// floor. Below need the floor is kept as far as it takes at most half of
// what nofile leaves beside the server's base (minConns at least), and
// the sandboxes the rest: fewer connections than sandboxes would leave
// slots that no request can reach, and more would leave the sandboxes
// too little.
func capFor(nofile uint64, r Reserve) (conns int, need uint64) {
	least := r.floor()
	need = r.descriptors() + least
	if nofile >= need {
		return int(min(nofile-r.descriptors(), uint64(maxInt))), need
	}
	half := uint64(0)
	if nofile > base {
		half = (nofile - base) / 2
	}
	return int(max(min(least, half), minConns)), need
}

// floor is the fewest connections a server keeps room for: one for each
// sandbox, since a one-shot run holds its request's connection for its
// whole life (as a session's exec does), and minConns at least.
func (r Reserve) floor() uint64 { return uint64(max(r.Sandboxes, minConns)) }

const maxInt = int(^uint(0) >> 1)

// Options say how ForSandboxes caps connections.
type Options struct {
	// Reserve is what to keep of the descriptors for the sandboxes.
	Reserve Reserve
	// MaxConns caps connections further when positive: each costs memory
	// too, which a high descriptor limit does not bound.
	MaxConns int
	// Tenants is how many API keys share the connections that requests
	// protect (see Authenticated); 0 counts as one.
	Tenants int
	// Log receives the cap at start and the evictions and refusals.
	Log *slog.Logger
}

// ForSandboxes wraps ln with the cap that keeps o.Reserve under the
// process's descriptor limit, which it first raises as far as it may
// (RLIMIT_NOFILE's soft limit to the hard one), and at most o.MaxConns.
// It logs the cap, and warns, naming the limit needed, when the
// descriptor limit is too low to keep the whole reserve.
func ForSandboxes(ln net.Listener, o Options) *Listener {
	log, r := o.Log, o.Reserve
	nofile, err := raiseFileLimit()
	if err != nil && nofile > 0 {
		log.Warn("keeping the descriptor limit", "err", err)
	} else if err != nil {
		log.Warn("reading the descriptor limit; connections capped at the minimum", "err", err, "max_connections", minConns)
		return newListener(ln, minConns, o.Tenants, log)
	}
	conns, need := capFor(nofile, r)
	if o.MaxConns > 0 {
		conns = min(conns, o.MaxConns)
	}
	if nofile < need {
		log.Warn(fmt.Sprintf("the descriptor limit (RLIMIT_NOFILE) is too low to keep a reserve for every sandbox beside a connection for each; connections are capped at %d and sandboxes that hold many descriptors may fail to open one: raise it to %d or more (ulimit -n %d, systemd LimitNOFILE=%d) or lower --max-sessions", conns, need, need, need),
			"nofile", nofile, "need", need, "sandboxes", r.Sandboxes, "max_connections", conns)
	} else {
		log.Info("connections capped to keep descriptors for sandboxes", "nofile", nofile, "sandboxes", r.Sandboxes,
			"per_sandbox", r.PerSandbox, "max_connections", conns)
	}
	return newListener(ln, conns, o.Tenants, log)
}
