package nsinit

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode"

	"github.com/warden-sandbox/warden/internal/strictjson"
)

// Refusal is the one line an init answers a Config it cannot take with
// (another protocol version, a field it does not know), in place of a
// Status or the first Event. Its shape is frozen across versions so that a
// host of any build reports it as a failure: hosts from before versioning
// read it as a Status with an Error (one-shot) or a failed Event (session),
// later ones by Refused.
type Refusal struct {
	Refused  bool    `json:"refused"`
	Kind     string  `json:"kind"`
	ExitCode int     `json:"exit_code"`
	Error    string  `json:"error"`
	Status   *Status `json:"status"`
}

// refusalCode is the exit code a Refusal carries for older hosts: Warden
// itself failed.
const refusalCode = 125

// NewRefusal is the Refusal that says why.
func NewRefusal(why string) Refusal {
	return Refusal{Refused: true, Kind: EventFailed, ExitCode: refusalCode, Error: why,
		Status: &Status{ExitCode: refusalCode, Error: why}}
}

// refusedError is an init's Refusal as the host reports it.
type refusedError struct{ Reason string }

func (e *refusedError) Error() string { return "warden-init refused the sandbox: " + e.Reason }

// ErrProtocol marks a message from the sandbox side that breaks the
// protocol: the host kills a box that sends one.
var ErrProtocol = errors.New("the sandbox broke the host protocol")

// maxProtocolError bounds what a protocol error says: it may quote the
// sandbox's bytes (a field's name), and it becomes a session's dead
// reason.
const maxProtocolError = 200

// protocolError is a broken message with what is wrong with it.
func protocolError(format string, a ...any) error {
	what := fmt.Sprintf(format, a...)
	if len(what) > maxProtocolError {
		what = strings.ToValidUTF8(what[:maxProtocolError], "") + "..."
	}
	return fmt.Errorf("%w: %s", ErrProtocol, what)
}

// refusal returns the Refusal in line, if line is one.
func refusal(line []byte) error {
	var r Refusal
	if strictjson.Decode(line, &r) != nil || !r.Refused {
		return nil
	}
	if r.Error == "" {
		r.Error = "no reason given"
	}
	return &refusedError{Reason: boxText(r.Error)}
}

// maxBoxText bounds a text from the box (a refusal's reason, a status's
// error) that the host puts in an error or a result's stderr.
const maxBoxText = 200

// boxText is s, which the box wrote, made fit for a one-line error:
// control characters, and any other rune that does not print (C1
// controls, bidirectional overrides, line separators), quoted (\x1b,
// \u202e), cut to maxBoxText bytes with "..." where it was longer.
func boxText(s string) string {
	var b strings.Builder
	for _, r := range s {
		q := string(r)
		switch {
		case r < 0x80 && !unicode.IsPrint(r):
			q = fmt.Sprintf(`\x%02x`, r)
		case r <= 0xffff && !unicode.IsPrint(r):
			q = fmt.Sprintf(`\u%04x`, r)
		case !unicode.IsPrint(r):
			q = fmt.Sprintf(`\U%08x`, r)
		}
		if b.Len()+len(q) > maxBoxText {
			b.WriteString("...")
			break
		}
		b.WriteString(q)
	}
	return b.String()
}

// parseStatus reads the one line a one-shot init answers with: a valid
// Status, or a *refusedError, or an error matching ErrProtocol. line is
// the sandbox's and may be anything.
func parseStatus(line []byte) (Status, error) {
	var st Status
	if err := strictjson.Decode(line, &st); err != nil {
		if rerr := refusal(line); rerr != nil {
			return Status{}, rerr
		}
		return Status{}, protocolError("status: %v", err)
	}
	if err := st.validate(); err != nil {
		return Status{}, err
	}
	st.Error = boxText(st.Error)
	return st, nil
}

// Bounds of the numbers in a Status and an Event.
const (
	maxSignal = 64
	// maxPid is the highest pid on 64-bit Linux: PID_MAX_LIMIT less one.
	maxPid = 1<<22 - 1
	// maxCPUTimeUS and maxRSSKiB keep the figures of an exited event
	// within what the host converts them to (nanoseconds, bytes) without
	// overflowing to a negative number.
	maxCPUTimeUS = math.MaxInt64 / 1000
	maxRSSKiB    = math.MaxInt64 / 1024
)

// MaxOOMKills bounds the OOM kill count a box reports (Event.OOMKills):
// 2^32 kills, far past what a box kills in its life at thousands a
// second, far below what the host's sums of them could overflow.
const MaxOOMKills = 1 << 32

// validate says what is wrong with a Status, as its producers never make
// it: exit codes are a byte, a signal's is 128 plus its number, a program
// that could not start ended 126 or 127 with a reason.
func (st *Status) validate() error {
	switch {
	case st.ExitCode < 0 || st.ExitCode > 255:
		return protocolError("exit code %d is not 0-255", st.ExitCode)
	case st.Signal < 0 || st.Signal > maxSignal:
		return protocolError("signal %d is not 0-%d", st.Signal, maxSignal)
	case st.Signal != 0 && st.ExitCode != 128+st.Signal:
		return protocolError("exit code %d for signal %d is not 128+%d", st.ExitCode, st.Signal, st.Signal)
	case st.StartFailed && (st.ExitCode != 126 && st.ExitCode != 127 || st.Signal != 0 || st.Error == ""):
		return protocolError("a start failure must have exit code 126 or 127, no signal and a reason")
	}
	return nil
}

// ParseEvent reads one line from a session's agent: a valid Event, or a
// *refusedError (first is set for the first line, the only one a Refusal
// may be), or an error matching ErrProtocol. Whether the ID is one the
// host gave out is the session's to check.
func ParseEvent(line []byte, first bool) (Event, error) {
	var e Event
	if err := strictjson.Decode(line, &e); err != nil {
		// A Refusal has a field no Event has.
		if first {
			if rerr := refusal(line); rerr != nil {
				return Event{}, rerr
			}
		}
		return Event{}, protocolError("event: %v", err)
	}
	if err := e.validate(first); err != nil {
		return Event{}, err
	}
	if e.Status != nil {
		e.Status.Error = boxText(e.Status.Error)
	}
	return e, nil
}

// validate says what is wrong with an Event: its kind out of turn, a
// field its kind never has or lacks, a number out of range.
func (e *Event) validate(first bool) error {
	if first != (e.Kind == EventReady || e.Kind == EventFailed) {
		return protocolError("event %.40q out of turn", e.Kind)
	}
	if e.Live != nil && e.Kind != EventResumed {
		return protocolError("%.40q event with a list of live processes", e.Kind)
	}
	switch e.Kind {
	case EventQuiesced:
		if e.ID != 0 || e.Pid != 0 || e.Status != nil || e.CPUTimeUS != 0 || e.MaxRSSKiB != 0 || e.OOMKills != 0 {
			return protocolError("quiesced event with fields")
		}
	case EventResumed:
		return e.validateResumed()
	case EventReady:
		if e.ID != 0 || e.Pid != 0 || e.Status != nil || e.CPUTimeUS != 0 || e.MaxRSSKiB != 0 || e.OOMKills != 0 {
			return protocolError("ready event with fields")
		}
	case EventFailed:
		return e.validateFailed()
	case EventStarted:
		return e.validateStarted()
	case EventExited:
		return e.validateExited()
	default:
		return protocolError("unknown event %.40q", e.Kind)
	}
	return nil
}

// validateResumed bounds EventResumed's list: at most MaxLive
// processes, each ID once and not 0, each with at most MaxRequestFDs
// streams of a known direction. Whether each ID is one the host may
// take is the session's to check.
func (e *Event) validateResumed() error {
	switch {
	case e.ID != 0 || e.Pid != 0 || e.Status != nil || e.CPUTimeUS != 0 || e.MaxRSSKiB != 0 || e.OOMKills != 0:
		return protocolError("resumed event with fields")
	case len(e.Live) > MaxLive:
		return protocolError("resumed event listing %d live processes, more than %d", len(e.Live), MaxLive)
	}
	ids := make(map[uint64]bool, len(e.Live))
	for _, p := range e.Live {
		switch {
		case p.ID == 0 || ids[p.ID]:
			return protocolError("resumed event listing process %d twice or as 0", p.ID)
		case len(p.Streams) > MaxRequestFDs:
			return protocolError("resumed event listing %d streams of process %d, more than %d", len(p.Streams), p.ID, MaxRequestFDs)
		}
		ids[p.ID] = true
		for _, d := range p.Streams {
			if !KnownStream(d) {
				return protocolError("resumed event with a stream of process %d of direction %.20q", p.ID, d)
			}
		}
	}
	return nil
}

func (e *Event) validateFailed() error {
	switch {
	case e.ID != 0 || e.Pid != 0 || e.CPUTimeUS != 0 || e.MaxRSSKiB != 0 || e.OOMKills != 0:
		return protocolError("failed event with an id, a pid or figures")
	case e.Status == nil || e.Status.Error == "":
		return protocolError("failed event without a reason")
	}
	return e.Status.validate()
}

func (e *Event) validateStarted() error {
	switch {
	case e.ID == 0:
		return protocolError("started event without an id")
	case e.Pid < 2 || e.Pid > maxPid:
		return protocolError("started event's pid %d is not 2-%d", e.Pid, maxPid)
	case e.Status != nil || e.CPUTimeUS != 0 || e.MaxRSSKiB != 0:
		return protocolError("started event with a status or figures")
	case e.OOMKills > MaxOOMKills:
		return protocolError("started event's oom_kills %d is more than %d", e.OOMKills, uint64(MaxOOMKills))
	}
	return nil
}

func (e *Event) validateExited() error {
	switch {
	case e.ID == 0:
		return protocolError("exited event without an id")
	case e.Pid != 0:
		return protocolError("exited event with a pid")
	case e.Status == nil:
		return protocolError("exited event without a status")
	case e.CPUTimeUS < 0 || e.CPUTimeUS > maxCPUTimeUS:
		return protocolError("exited event's cpu_time_us %d is not 0-%d", e.CPUTimeUS, int64(maxCPUTimeUS))
	case e.MaxRSSKiB < 0 || e.MaxRSSKiB > maxRSSKiB:
		return protocolError("exited event's max_rss_kib %d is not 0-%d", e.MaxRSSKiB, int64(maxRSSKiB))
	case e.OOMKills > MaxOOMKills:
		return protocolError("exited event's oom_kills %d is more than %d", e.OOMKills, uint64(MaxOOMKills))
	}
	return e.Status.validate()
}

// maxStatusLine bounds the line a one-shot init answers with: a Status is
// a few hundred bytes, and the host never trusts the sandbox side with
// more.
const maxStatusLine = 64 << 10

// ReadStatus reads and parses the one line a one-shot init answers with
// (see parseStatus). It returns io.EOF when the init ended without a
// whole line: it was killed, or never got to answer.
func ReadStatus(r io.Reader) (Status, error) {
	// A small buffer: every one-shot run reads one status, which is short.
	br := bufio.NewReaderSize(r, 512)
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		switch {
		case len(line) > maxStatusLine:
			return Status{}, protocolError("status line longer than %d bytes", maxStatusLine)
		case err == nil:
			return parseStatus(line)
		case !errors.Is(err, bufio.ErrBufferFull):
			return Status{}, io.EOF
		}
	}
}

// exitNoHost is the init's exit status when it cannot talk to the host.
// The host reads it only to explain an init that never answered (see
// SilentExit); it only has to differ from the statuses a program's end is
// reported with.
const exitNoHost = 111

// exitRefused is the init's exit status when it refused its Config (see
// Refusal), which the host reads only if the line never arrived.
const exitRefused = 112

// ExitUserAgentDied is the agent's exit status when the user's agent
// (Config.HideAgent) was killed (the user's PID namespace, and every
// process in it, ended with it). gVisor delivers SIGKILL and SIGSTOP to a PID
// namespace's init from inside it, so the sandbox's own code can do the
// first; the host names it by EndedCause, not by a limit.
const ExitUserAgentDied = 113

// ExitAgentUnlocked is the agent's exit status when, having started the
// user's agent, it could not drop its own capabilities on every thread
// (lockdownAllThreads): it tried to kill the user's agent and exited,
// which ends the box. Its error went to its stderr.
const ExitAgentUnlocked = 114

// ErrAgentUnlocked is a sandbox's end by ExitAgentUnlocked: Warden's
// failure, not the sandbox's code's.
var ErrAgentUnlocked = errors.New("warden-init could not drop the agent's capabilities after starting the user's agent (its error is in the init's stderr)")

// ErrAgentKilled is a sandbox's end by ExitUserAgentDied.
var ErrAgentKilled = errors.New("the sandbox's own code killed or stopped its agent (PID 1)")

// EndedCause is the error an exit code of a box's init stands for where
// it has one (ErrAgentKilled), or nil.
func EndedCause(code int) error {
	switch code {
	case ExitUserAgentDied:
		return ErrAgentKilled
	case ExitAgentUnlocked:
		return ErrAgentUnlocked
	}
	return nil
}

// SilentExit explains the exit code of an init that ended without
// answering, in one clause ("" for codes it has no word for). An init
// from before protocol versioning exits exitNoHost on a versioned Config,
// so that is the likely cause.
func SilentExit(code int) string {
	switch code {
	case exitNoHost:
		return "warden-init could not read its configuration or reach warden; if it is from another build, " + reinstall
	case exitRefused:
		return "warden-init refused its configuration; " + reinstall
	}
	return ""
}
