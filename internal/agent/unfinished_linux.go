package agent

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/strictjson"
)

// Unfinished maps a process ID to what a checkpointed session knew of
// it (Session.Unfinished, Frame.Prior).
type Unfinished map[uint64]Pending

// Pending is one unfinished process of a checkpoint: the events it had
// reported, 0, 1 (started) or 2 (exited, which may come first), and,
// for a process spawned over the stream, the direction the host granted
// each of its fds (nsinit.StreamIn, StreamOut, StreamNull). The
// directions are the host's own record, so a restored agent, which is
// the box's, cannot list a process's fds as more than they were granted
// (resumedLine). In JSON (a checkpoint's record) a process with no
// directions is its events alone, a number, as before they were kept.
type Pending struct {
	Events  uint8
	Streams []string
}

// pendingJSON is Pending's JSON where it has directions.
type pendingJSON struct {
	Events  uint8    `json:"events"`
	Streams []string `json:"streams"`
}

// MarshalJSON writes p as its events alone when it has no directions.
func (p Pending) MarshalJSON() ([]byte, error) {
	if p.Streams == nil {
		return json.Marshal(p.Events)
	}
	return json.Marshal(pendingJSON(p))
}

// UnmarshalJSON reads either of MarshalJSON's forms, strictly.
func (p *Pending) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] != '{' {
		*p = Pending{}
		return json.Unmarshal(b, &p.Events)
	}
	var j pendingJSON
	if err := strictjson.Decode(b, &j); err != nil {
		return err
	}
	if j.Streams == nil {
		j.Streams = []string{}
	}
	*p = Pending(j)
	return nil
}

// MaxUnfinished bounds the processes a checkpoint may carry unfinished:
// as many as a restored agent may list running.
const MaxUnfinished = nsinit.MaxLive

// check refuses u unless each ID is in 1..last, each events value one of
// Pending's, and each process's directions at most a spawn's fds and
// each known.
func (u Unfinished) check(last uint64) error {
	if len(u) > MaxUnfinished {
		return fmt.Errorf("the checkpoint carries %d unfinished processes, more than %d", len(u), MaxUnfinished)
	}
	for id, p := range u {
		saw := p.Events
		if id == 0 || id > last || (saw != 0 && saw != sawStarted && saw != sawExited) {
			return fmt.Errorf("the checkpoint's unfinished process %d (events %d) is out of range (IDs 1..%d, events 0..2)", id, saw, last)
		}
		if len(p.Streams) > nsinit.MaxRequestFDs {
			return fmt.Errorf("the checkpoint's unfinished process %d has %d fds, more than %d", id, len(p.Streams), nsinit.MaxRequestFDs)
		}
		for i, d := range p.Streams {
			if !nsinit.KnownStream(d) {
				return fmt.Errorf("the checkpoint's unfinished process %d has fd %d of direction %.20q, none of in, out, null", id, i, d)
			}
		}
	}
	return nil
}

// checkListed checks the directions a restored agent lists for process
// id against those its spawn was granted (p.Streams): the same number,
// each the same or StreamNull (a stream that ended, or a relay that could
// not be kept). More than was granted is a breach; a process the host
// kept no directions of may be listed with StreamNull alone.
func (p Pending) checkListed(id uint64, listed []string) error {
	if p.Streams != nil && len(listed) != len(p.Streams) {
		return fmt.Errorf("%w: the restored agent lists %d fds of process %d, which was spawned with %d", nsinit.ErrProtocol, len(listed), id, len(p.Streams))
	}
	for i, d := range listed {
		granted := nsinit.StreamNull
		if p.Streams != nil {
			granted = p.Streams[i]
		}
		if d != granted && d != nsinit.StreamNull {
			return fmt.Errorf("%w: the restored agent lists process %d's fd %d as %.20q, which was granted %q", nsinit.ErrProtocol, id, i, d, granted)
		}
	}
	return nil
}
