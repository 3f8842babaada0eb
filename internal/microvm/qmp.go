package microvm

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"time"
)

// qmpFD is the QMP socket's descriptor number in QEMU, after the agent
// socket, on hosts where QEMU starts stopped (-S) until it is in its
// cgroup (cgroup v2; see qmpArgs).
const qmpFD = agentFD + 1

// QMP's replies come from QEMU, which a guest may have taken over: each
// line is bounded, and so is the number of lines (events) read while
// waiting for a command's reply.
const (
	qmpMaxLine   = 4096
	qmpMaxEvents = 16
)

// qmpTimeout bounds the whole QMP exchange: QEMU's monitor answers at once
// (it is stopped, doing nothing else).
const qmpTimeout = 5 * time.Second

// qmpArgs start QEMU stopped, with a QMP monitor on qmpFD, so the host can
// move it into its cgroup before the guest runs and then continue it.
func qmpArgs() []string {
	return []string{"-S", "-chardev", fmt.Sprintf("socket,id=qmp,fd=%d", qmpFD), "-mon", "chardev=qmp,mode=control"}
}

// qmpMessage is one line QEMU writes on QMP: its greeting, a command's
// reply (return or error) or an event. Exactly one field is set.
type qmpMessage struct {
	QMP    json.RawMessage `json:"QMP"`
	Return json.RawMessage `json:"return"`
	Error  *struct {
		Class string `json:"class"`
		Desc  string `json:"desc"`
	} `json:"error"`
	Event string `json:"event"`
	// What an event or a reply may carry besides.
	Data      json.RawMessage `json:"data"`
	Timestamp json.RawMessage `json:"timestamp"`
	ID        json.RawMessage `json:"id"`
}

// qmpCont greets QEMU's monitor, leaves negotiation (qmp_capabilities) and
// continues the stopped VM (cont), each answered before the next; rw's
// deadline is the caller's.
func qmpCont(rw io.ReadWriter) error {
	r := bufio.NewReaderSize(rw, qmpMaxLine)
	m, err := qmpRead(r)
	if err != nil {
		return err
	}
	if m.QMP == nil {
		return errors.New("microvm: QEMU's monitor did not greet with QMP")
	}
	for _, cmd := range []string{"qmp_capabilities", "cont"} {
		if err := qmpExecute(rw, r, cmd); err != nil {
			return err
		}
	}
	return nil
}

// qmpExecute sends cmd and reads its reply, skipping at most qmpMaxEvents
// events.
func qmpExecute(w io.Writer, r *bufio.Reader, cmd string) error {
	if _, err := fmt.Fprintf(w, "{\"execute\":%q}\n", cmd); err != nil {
		return fmt.Errorf("microvm: QMP %s: %w", cmd, err)
	}
	for range qmpMaxEvents + 1 {
		m, err := qmpRead(r)
		switch {
		case err != nil:
			return fmt.Errorf("microvm: QMP %s: %w", cmd, err)
		case m.Error != nil:
			return fmt.Errorf("microvm: QMP %s failed: %.200q", cmd, m.Error.Class+": "+m.Error.Desc)
		case m.Return != nil:
			return nil
		}
	}
	return fmt.Errorf("microvm: QMP %s: no reply within %d messages", cmd, qmpMaxEvents+1)
}

// qmpRead reads one line of at most qmpMaxLine bytes and parses it
// strictly: one JSON object with exactly one of qmpMessage's fields.
func qmpRead(r *bufio.Reader) (qmpMessage, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return qmpMessage{}, fmt.Errorf("a QMP line longer than %d bytes", qmpMaxLine)
	}
	if err != nil {
		return qmpMessage{}, fmt.Errorf("reading QMP: %w", err)
	}
	var m qmpMessage
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return qmpMessage{}, fmt.Errorf("parsing a QMP line: %w", err)
	}
	// Only JSON whitespace may follow: dec.More would let a stray ']' or
	// '}' pass.
	if rest := bytes.TrimLeft(line[dec.InputOffset():], " \t\r\n"); len(rest) != 0 {
		return qmpMessage{}, fmt.Errorf("a QMP line holds more than one message: %.100q", line)
	}
	set := 0
	for _, b := range []bool{m.QMP != nil, m.Return != nil, m.Error != nil, m.Event != ""} {
		if b {
			set++
		}
	}
	if set != 1 {
		return qmpMessage{}, fmt.Errorf("a QMP line is neither a greeting, a reply nor an event: %.100q", line)
	}
	return m, nil
}
