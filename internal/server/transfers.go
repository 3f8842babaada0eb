package server

import (
	"fmt"
	"net/http"
	"sync"
)

// MaxTransfersPerSession bounds a session's uploads and downloads in
// flight at once. Each holds a connection and, in the server, the
// workspace's directory and the file being written or read, which a slow
// client may hold for as long as its pacing allows; the bound keeps what
// a session's transfers hold within the descriptors reserved for it
// (TransferDescriptors).
const MaxTransfersPerSession = 4

// TransferDescriptors is what a session's transfers may hold in the
// server besides their connections (a directory and a file each), for
// the reserve kept free of connections (see internal/connlimit).
const TransferDescriptors = 2 * MaxTransfersPerSession

// errTransfers answers a transfer past MaxTransfersPerSession.
var errTransfers = &apiError{http.StatusServiceUnavailable, codeUnavailable,
	fmt.Sprintf("too many file transfers in this session at once (at most %d): retry when one has finished", MaxTransfersPerSession)}

// transfers counts the uploads and downloads in flight, by session.
type transfers struct {
	mu     sync.Mutex
	active map[string]int
}

// start counts a transfer of session id in and returns the func that
// counts it out, or errTransfers when the session has its fill.
func (t *transfers) start(id string) (func(), error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.active[id] >= MaxTransfersPerSession {
		return nil, errTransfers
	}
	if t.active == nil {
		t.active = map[string]int{}
	}
	t.active[id]++
	return sync.OnceFunc(func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if t.active[id]--; t.active[id] == 0 {
			delete(t.active, id)
		}
	}), nil
}
