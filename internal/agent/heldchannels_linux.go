package agent

import (
	"sync"
	"sync/atomic"
)

// heldChannels counts the stream channels only the host can free: file
// calls in flight and the relays of processes still running. A relay of
// an ended process does not count though its channel may still be open:
// it only drains what is left, the host closes it within outputLinger
// (cutRelays), and its slot comes back once the box answers that close.
// The count is what tells a request it can never get its channels
// (ErrNoChannel at once) from one that only has to wait.
//
// A relay counts while its process's done is open, read at each count
// rather than updated by a goroutine that waits for done: a request that
// follows a process's end (a context deleted, then code run) must see its
// channels as freed, not race the goroutine that would say so.
type heldChannels struct {
	files  atomic.Int64
	mu     sync.Mutex
	relays map[*relay]struct{}
}

// add counts r until it ends or its process does.
func (h *heldChannels) add(r *relay) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.relays == nil {
		h.relays = make(map[*relay]struct{})
	}
	h.relays[r] = struct{}{}
}

// remove forgets r, which has ended.
func (h *heldChannels) remove(r *relay) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.relays, r)
}

// count is the number of channels the host holds now.
func (h *heldChannels) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := int(h.files.Load())
	for r := range h.relays {
		select {
		case <-r.done:
		default:
			n++ // its process runs
		}
	}
	return n
}
