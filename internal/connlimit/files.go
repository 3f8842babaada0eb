package connlimit

import (
	"fmt"
	"log/slog"
	"math"
	"math/bits"
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

// descriptors is the reserve in descriptors, the server's own included,
// saturated at the largest uint64 rather than wrapping round to a small
// figure that would drop the reserve.
func (r Reserve) descriptors() uint64 {
	hi, lo := bits.Mul64(uint64(max(r.PerSandbox, 0)), uint64(max(r.Sandboxes, 0)))
	return addSat(lo, base, hi != 0)
}

// addSat is a+b, or the largest uint64 when over is set or the sum wraps.
func addSat(a, b uint64, over bool) uint64 {
	sum, carry := bits.Add64(a, b, 0)
	if over || carry != 0 {
		return math.MaxUint64
	}
	return sum
}

// caps are how many connections a server may hold.
type caps struct {
	// conns is the cap on all connections: what the limit leaves beside
	// the reserve, and never fewer than Reserve.floor while that takes at
	// most half of what nofile leaves beside the server's base.
	conns int
	// spare is the cap on connections no tenant's request protects
	// (pending or idle): what the limit leaves beside the whole reserve,
	// minConns at least, and conns at most. Strangers without a key can
	// hold no more than that, so the floor raised above it for tenants'
	// one-shot runs is never theirs to take from the sandboxes.
	spare int
	// need is the limit that keeps the reserve whole beside the floor.
	need uint64
}

// capFor is how many connections a server may hold under a descriptor
// limit of nofile while keeping r for the rest. Below need the floor is
// kept as far as it takes at most half of what nofile leaves beside the
// server's base (minConns at least), and the sandboxes the rest: fewer
// connections than sandboxes would leave slots that no request can
// reach, and more would leave the sandboxes too little. Only connections
// a tenant's request protects may reach that floor; the rest stay within
// what nofile leaves beside the whole reserve, as they would without it.
func capFor(nofile uint64, r Reserve) caps {
	least := r.floor()
	c := caps{need: addSat(r.descriptors(), least, false)}
	left := uint64(0)
	if d := r.descriptors(); nofile > d {
		left = nofile - d
	}
	c.spare = int(min(max(left, minConns), uint64(maxInt)))
	if nofile >= c.need {
		c.conns = c.spare
		return c
	}
	half := uint64(0)
	if nofile > base {
		half = (nofile - base) / 2
	}
	c.conns = int(max(min(least, half), minConns))
	c.spare = min(c.spare, c.conns)
	return c
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
	// Keyless says the server takes requests without a key (on loopback
	// only): any client may run sandboxes, so there is no stranger to
	// keep from the floor, and unprotected connections may reach it too
	// (a burst's requests are unprotected until they reach a handler).
	Keyless bool
	// Pool is how many of Reserve.Sandboxes are built ahead (--pool),
	// which the start-up warning subtracts from the sessions that fit.
	Pool int
	// Log receives the cap at start and the evictions and refusals.
	Log *slog.Logger
}

// ForSandboxes wraps ln with the cap that keeps o.Reserve under the
// process's descriptor limit, which it first raises as far as it may
// (RLIMIT_NOFILE's soft limit to the hard one), and at most o.MaxConns.
// It logs the cap, and warns, saying what to change, when the descriptor
// limit is too low to keep the whole reserve.
func ForSandboxes(ln net.Listener, o Options) *Listener {
	log, r := o.Log, o.Reserve
	nofile, err := raiseFileLimit()
	if err != nil && nofile > 0 {
		log.Warn("keeping the descriptor limit", "err", err)
	} else if err != nil {
		log.Warn("reading the descriptor limit; connections capped at the minimum", "err", err, "max_connections", minConns)
		return newListener(ln, caps{conns: minConns, spare: minConns}, o.Tenants, log)
	}
	c := capFor(nofile, r)
	if o.MaxConns > 0 {
		c.conns = min(c.conns, o.MaxConns)
	}
	c.spare = min(c.spare, c.conns)
	if o.Keyless {
		c.spare = c.conns
	}
	attrs := []any{"nofile", nofile, "sandboxes", r.Sandboxes, "per_sandbox", r.PerSandbox,
		"max_connections", c.conns, "max_unprotected_connections", c.spare}
	if nofile < c.need {
		log.Warn(shortage(nofile, ceiling(nofile), r, o.Pool, c), append(attrs, "need", c.need)...)
	} else {
		log.Info("connections capped to keep descriptors for sandboxes", attrs...)
	}
	return newListener(ln, c, o.Tenants, log)
}

// shortage is the start-up warning of a descriptor limit nofile too low
// for the reserve: what it leaves, and either the limit to raise it to
// or, when that is past what the process may raise it to (most, its
// ceiling), the --max-sessions that fits beside pool sandboxes built
// ahead.
func shortage(nofile, most uint64, r Reserve, pool int, c caps) string {
	fix := fmt.Sprintf("raise it to %d or more (ulimit -n %d, systemd LimitNOFILE=%d) or lower --max-sessions", c.need, c.need, c.need)
	if c.need > most {
		fit := int64(0)
		if nofile > base {
			fit = int64((nofile-base)/uint64(max(r.PerSandbox, 0)+1)) - int64(max(pool, 0))
		}
		fix = fmt.Sprintf("it cannot be raised to the %d that would keep it (at most %d here), so lower --max-sessions to %d or less beside --pool %d", c.need, most, max(fit, 0), pool)
		if fit < 1 {
			fix = fmt.Sprintf("it cannot be raised to the %d that would keep it (at most %d here), and keeps no sandbox's reserve beside --pool %d: lower --pool or raise the hard limit", c.need, most, pool)
		}
	}
	return fmt.Sprintf("the descriptor limit (RLIMIT_NOFILE) %d is too low to keep a reserve for every sandbox beside a connection for each; "+
		"connections are capped at %d, %d of them without a tenant's request, and sandboxes that hold many descriptors may fail to open one: %s; "+
		"--max-connections lowers both caps", nofile, c.conns, c.spare, fix)
}
