package e2b

import (
	"net/http"
	"strconv"
	"time"
)

// Keepalives of envd's streams (a process's output, WatchDir): a stream
// with nothing else to send sends a keepalive event every interval the
// client asked for in keepaliveHeader (seconds; the SDK sends 50), held
// within these bounds, or envd's 90 s without it. At most 10 minutes,
// since WatchDir's keepalives also check that the sandbox still lives.
const (
	keepaliveHeader  = "Keepalive-Ping-Interval"
	defaultKeepalive = 90 * time.Second
	minKeepalive     = time.Second
	maxKeepalive     = 10 * time.Minute
)

// keepaliveEvery is the keepalive interval a stream asked for.
func keepaliveEvery(h http.Header) time.Duration {
	s, err := strconv.Atoi(h.Get(keepaliveHeader))
	if err != nil {
		return defaultKeepalive
	}
	return min(max(time.Duration(s)*time.Second, minKeepalive), maxKeepalive)
}
