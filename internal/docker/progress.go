package docker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// progressMessage is the part of one message of the engine's progress
// stream (image import and pull) that can say the work failed: once the
// engine has sent its 200 it reports a failure only here, as "error" and
// "errorDetail".
type progressMessage struct {
	Status      string `json:"status"`
	Stream      string `json:"stream"`
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// maxProgressError bounds how much of the engine's error goes into ours.
const maxProgressError = 512

// seeLog is the next step every import error names.
const seeLog = " (see dockerd's log)"

// progressError reads an import's progress stream to its end and returns
// the first failure it reports, as one line. The engine ends a successful
// import with the image's id ("sha256:..."); a stream that does not, is
// empty, or is not a sequence of JSON objects is an error too, since then
// nothing says the import is done.
func progressError(stream []byte) error {
	return streamError(stream, "import", "the image's id", func(m progressMessage) bool {
		return strings.HasPrefix(m.Status, "sha256:")
	})
}

// streamError reads the engine's progress stream of an operation (what)
// to its end: the first failure a message reports, as one line, or an
// error unless the last message is done (which the error calls end).
func streamError(stream []byte, what, end string, done func(progressMessage) bool) error {
	d := json.NewDecoder(bytes.NewReader(stream))
	finished := false
	for {
		var m progressMessage
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("docker: reading the engine's %s progress: %w%s", what, err, seeLog)
		}
		if msg := m.failure(); msg != "" {
			return fmt.Errorf("docker: %s%s", oneLine(msg, maxProgressError), seeLog)
		}
		finished = done(m)
	}
	if !finished {
		return fmt.Errorf("docker: the engine's %s progress ended without %s, so the %s may not have happened%s", what, end, what, seeLog)
	}
	return nil
}

// oneLine makes s, which the engine wrote, one line of at most n bytes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		// A cut may split a character; what is left of it goes.
		s = strings.ToValidUTF8(s[:n], "") + "…"
	}
	return s
}

// loadError reads an images/load answer as progressError reads an
// import's: it is done when its last message names the image loaded.
func loadError(stream []byte) error {
	return streamError(stream, "load", "naming the image loaded", func(m progressMessage) bool {
		return strings.HasPrefix(m.Stream, "Loaded image")
	})
}

// failure is the error a message reports, or "".
func (m progressMessage) failure() string {
	if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
		return m.ErrorDetail.Message
	}
	return m.Error
}
