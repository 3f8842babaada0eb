package connlimit

import (
	"log/slog"
	"net"
)

// Descriptors the cap leaves for everything but connections.
const (
	// PerSession is what one session or one-shot run may hold in the
	// server: measured, an idle session holds 10 descriptors (control
	// socket, workspace directory, cgroup files, pidfds), an exec 3 more
	// (its pipes) and an egress proxy 9 more; each of the proxy's at most
	// 64 tunnels (egress.DefaultMaxConns) holds 2. So 32 for all but the
	// tunnels, and 128 for them.
	PerSession = 32 + 2*64
	// Base is what the server holds besides sessions and connections: its
	// listener, logs, state directory, the spawner's pipes, epoll, and
	// the files it opens for a moment.
	Base = 256
	// MinConns is the fewest connections the cap allows, however low the
	// descriptor limit, so a server on a small limit still serves.
	MinConns = 64
	// defaultSessions is the session manager's own default, taken when
	// the caller's session count is not positive.
	defaultSessions = 64
)

// Cap is how many connections a server may hold under a descriptor limit
// of nofile while keeping Base + PerSession per sandbox for the rest:
// nofile - Base - PerSession*sandboxes, and MinConns at least. enough is
// false when that floor takes descriptors from the sandboxes' reserve.
func Cap(nofile uint64, sandboxes int) (conns int, enough bool) {
	if sandboxes <= 0 {
		sandboxes = defaultSessions
	}
	reserve := uint64(Base) + uint64(PerSession)*uint64(sandboxes)
	if nofile < reserve+MinConns {
		return MinConns, false
	}
	return int(min(nofile-reserve, uint64(maxInt))), true
}

const maxInt = int(^uint(0) >> 1)

// ForSandboxes wraps ln with the cap for a server of at most sandboxes
// sessions and runs at once (0: the session manager's default of 64),
// under the process's descriptor limit, which it first raises as far as
// it may (RLIMIT_NOFILE's soft limit to the hard one). It logs the cap,
// and warns when the limit is too low to keep the whole reserve.
func ForSandboxes(ln net.Listener, sandboxes int, log *slog.Logger) *Listener {
	nofile, err := RaiseFileLimit()
	if err != nil && nofile > 0 {
		log.Warn("keeping the descriptor limit", "err", err)
	} else if err != nil {
		log.Warn("reading the descriptor limit; connections capped at the minimum", "err", err, "max_connections", MinConns)
		return New(ln, MinConns, log)
	}
	conns, enough := Cap(nofile, sandboxes)
	if !enough {
		log.Warn("the descriptor limit (RLIMIT_NOFILE) is too low to keep a reserve for every sandbox beside the minimum of connections; raise it (ulimit -n, systemd LimitNOFILE=) or lower --max-sessions",
			"nofile", nofile, "sandboxes", sandboxes, "max_connections", conns)
	} else {
		log.Info("connections capped to keep descriptors for sandboxes", "nofile", nofile, "sandboxes", sandboxes, "max_connections", conns)
	}
	return New(ln, conns, log)
}
