package e2b

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"
	"golang.org/x/time/rate"

	"github.com/warden-sandbox/warden/internal/e2b/processpb"
	"github.com/warden-sandbox/warden/internal/interp"
)

// Bounds on one sandbox's processes, so that no client can make the host
// hold more for it than these, whatever it sends.
const (
	// maxProcs is how many processes one sandbox may run at once through
	// this API, starting ones included.
	maxProcs = 64
	// maxEndedProcs is how many ended processes a sandbox keeps for a late
	// Connect (their end event), and keepEndedProcs for how long, as envd does.
	maxEndedProcs  = 64
	keepEndedProcs = 30 * time.Second
	// keptOutput is how much output of one process is kept for streams
	// that have not read it: a slow stream's backlog, or what came while
	// none was attached.
	keptOutput = 128 << 10
	// maxProcStreams is how many streams may be attached to one process.
	maxProcStreams = 16
	// maxStdinInFlight bounds the stdin bytes of one sandbox's SendInput
	// and StreamInput calls being written at once.
	maxStdinInFlight = 4 << 20
	// discardTurns is how many times a second one sandbox's detached
	// processes may throw away a full pipe of output nobody reads (at
	// most 1 MiB each): measured on the 2-core VM, a detached `yes`
	// thrown away at drain's own pace (100 times a second) cost warden
	// serve 34 ms of CPU a second, for each such process; a sandbox's
	// floods now share 10 turns, whatever their number.
	discardTurns = 10
	// firstPID is the first pid handed out in a sandbox (see procTable).
	firstPID = 1_000_000
)

// procTables holds each sandbox's procTable of processes, by sandbox id.
type procTables struct {
	mu     sync.Mutex
	tables map[string]*procTable
}

// procTable is one sandbox's processes. A pid here is a handle this API hands
// out, counted up from firstPID and never reused in the sandbox, not the
// process's id inside the box (the box does not report it): far above
// the box's own pids, so `kill -0 PID` in the box finds nothing. The
// count is the Sandbox's (Sandbox.pids), which lives as long as the
// sandbox, not the table's, which is dropped whenever the sandbox has no
// process: a new table counting from firstPID again gave a newer process
// an old handle's pid, which a client still holding it could kill or feed.
type procTable struct {
	mu       sync.Mutex
	live     map[uint32]*proc
	ended    []*proc // oldest first, at most maxEndedProcs
	starting int
	pids     *atomic.Uint32 // how many pids the sandbox has handed out
	stdin    int            // bytes of stdin being written
	// discards paces the throwing away of output nobody reads.
	discards *rate.Limiter
}

// newProcTable is an empty table counting pids with pids (nil: a count of
// its own, for a table that starts nothing).
func newProcTable(pids *atomic.Uint32) *procTable {
	if pids == nil {
		pids = new(atomic.Uint32)
	}
	return &procTable{live: map[uint32]*proc{}, pids: pids, discards: rate.NewLimiter(discardTurns, 1)}
}

// lookup is sandbox id's table, or an empty one, not kept, when it has
// none: a call that starts nothing leaves nothing behind.
func (t *procTables) lookup(id string) *procTable {
	t.mu.Lock()
	defer t.mu.Unlock()
	if tb := t.tables[id]; tb != nil {
		return tb
	}
	return newProcTable(nil)
}

// reserve takes one of sandbox sb's process slots for a start, making its
// table if need be. Under t.mu, so that drop cannot forget the table
// between the two.
func (t *procTables) reserve(sb *Sandbox) (*procTable, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tb := t.tables[sb.ID]
	if tb == nil {
		tb = newProcTable(sb.pids)
		t.tables[sb.ID] = tb
	}
	if err := tb.reserve(); err != nil {
		return nil, err
	}
	return tb, nil
}

// unreserve gives back a slot whose start failed, and forgets the table
// if that left it empty.
func (t *procTables) unreserve(id string, tb *procTable) {
	tb.unreserve()
	t.drop(id, tb)
}

// drop forgets sandbox id's table once it holds nothing.
func (t *procTables) drop(id string, tb *procTable) {
	t.mu.Lock()
	defer t.mu.Unlock()
	tb.mu.Lock()
	empty := len(tb.live) == 0 && len(tb.ended) == 0 && tb.starting == 0
	tb.mu.Unlock()
	if empty && t.tables[id] == tb {
		delete(t.tables, id)
	}
}

// reserve takes one of the table's process slots for a start.
func (tb *procTable) reserve() error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if len(tb.live)+tb.starting >= maxProcs {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"this sandbox runs %d processes, the most it may: kill one (commands.kill) or wait for one to end", maxProcs))
	}
	tb.starting++
	return nil
}

// unreserve gives back a slot whose start failed.
func (tb *procTable) unreserve() {
	tb.mu.Lock()
	tb.starting--
	tb.mu.Unlock()
}

// add registers a started process in a reserved slot and gives it a pid.
func (tb *procTable) add(p *proc) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	tb.starting--
	p.pid = firstPID + tb.pids.Add(1) - 1
	tb.live[p.pid] = p
}

// retire moves an ended process from live to ended, dropping the oldest
// ended one past maxEndedProcs.
func (tb *procTable) retire(p *proc) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	delete(tb.live, p.pid)
	tb.ended = append(tb.ended, p)
	if len(tb.ended) > maxEndedProcs {
		tb.ended[0] = nil
		tb.ended = tb.ended[1:]
	}
}

// forget drops an ended process once keepEndedProcs has passed.
func (tb *procTable) forget(p *proc) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for i, e := range tb.ended {
		if e == p {
			tb.ended = append(tb.ended[:i], tb.ended[i+1:]...)
			return
		}
	}
}

// find is the live process sel names, or a not_found error that says so.
func (tb *procTable) find(sel *processpb.ProcessSelector) (*proc, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if p := tb.match(tb.liveList(), sel); p != nil {
		return p, nil
	}
	return nil, selectorError(sel)
}

// findAny is the live or recently ended process sel names, live first.
func (tb *procTable) findAny(sel *processpb.ProcessSelector) (*proc, error) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if p := tb.match(tb.liveList(), sel); p != nil {
		return p, nil
	}
	for i := len(tb.ended) - 1; i >= 0; i-- { // the latest with a tag
		if p := tb.match(tb.ended[i:i+1], sel); p != nil {
			return p, nil
		}
	}
	return nil, selectorError(sel)
}

// liveList is the live processes, oldest first; tb.mu is held.
func (tb *procTable) liveList() []*proc {
	list := make([]*proc, 0, len(tb.live))
	for _, p := range tb.live {
		list = append(list, p)
	}
	slices.SortFunc(list, func(a, b *proc) int { return cmp.Compare(a.pid, b.pid) })
	return list
}

// match is the process in list that sel names, or nil.
func (tb *procTable) match(list []*proc, sel *processpb.ProcessSelector) *proc {
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		for _, p := range list {
			if p.pid == s.Pid {
				return p
			}
		}
	case *processpb.ProcessSelector_Tag:
		for _, p := range list {
			if p.tag != nil && *p.tag == s.Tag {
				return p
			}
		}
	}
	return nil
}

// selectorError says that no process matches sel, or that sel names none.
func selectorError(sel *processpb.ProcessSelector) error {
	switch s := sel.GetSelector().(type) {
	case *processpb.ProcessSelector_Pid:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found: it ended or never ran here; list running ones with commands.list", s.Pid))
	case *processpb.ProcessSelector_Tag:
		return connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %q not found: it ended or never ran here; list running ones with commands.list", s.Tag))
	}
	return connect.NewError(connect.CodeInvalidArgument, errors.New("no process selected: give process.pid or process.tag"))
}

// takeStdin reserves n bytes of the sandbox's stdin in flight.
func (tb *procTable) takeStdin(n int) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	if tb.stdin+n > maxStdinInFlight {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf(
			"this sandbox has %d bytes of stdin being written already, and %d more would pass the %d allowed: wait for the process to read it, or send less at a time",
			tb.stdin, n, maxStdinInFlight))
	}
	tb.stdin += n
	return nil
}

// giveStdin returns n bytes taken by takeStdin.
func (tb *procTable) giveStdin(n int) {
	tb.mu.Lock()
	tb.stdin -= n
	tb.mu.Unlock()
}

// proc is one process started through this API.
type proc struct {
	pid    uint32 // set by procTable.add
	tag    *string
	config *processpb.ProcessConfig
	// configSize is procConfigSize of the Start (at most maxProcConfigBytes).
	configSize int
	p          interp.Process
	out        *outputLog

	stdinMu sync.Mutex
	stdin   *os.File // host end of the stdin pipe; nil: none or closed

	// exited is closed when the process has ended; ended when its output
	// is drained and end is set.
	exited chan struct{}
	ended  chan struct{}
	end    *processpb.ProcessEvent_EndEvent
}

// procEndEvent says how the process ended as envd does (after Go's
// os.ProcessState): exit_code is the status of a process that exited,
// -1 for one a signal killed; status and error are the words Go uses.
func procEndEvent(st interp.ExitStatus, err error) *processpb.ProcessEvent_EndEvent {
	if err != nil {
		msg := "the sandbox ended before the process: " + err.Error()
		return &processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: "signal: killed", Error: &msg}
	}
	if st.Signal != 0 {
		status := "signal: " + procSignalName(st.Signal)
		return &processpb.ProcessEvent_EndEvent{ExitCode: -1, Status: status, Error: &status}
	}
	status := fmt.Sprintf("exit status %d", st.Code)
	e := &processpb.ProcessEvent_EndEvent{ExitCode: int32(st.Code), Exited: true, Status: status}
	if st.Code != 0 {
		e.Error = &status
	}
	return e
}

// procSignalName is the word Go's os.ProcessState uses for a signal.
func procSignalName(sig int) string {
	switch sig {
	case 9:
		return "killed"
	case 15:
		return "terminated"
	case 2:
		return "interrupt"
	case 6:
		return "aborted"
	case 11:
		return "segmentation fault"
	case 13:
		return "broken pipe"
	case 1:
		return "hangup"
	}
	return fmt.Sprintf("signal %d", sig)
}
