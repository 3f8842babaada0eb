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
	d := json.NewDecoder(bytes.NewReader(stream))
	last := ""
	for {
		var m progressMessage
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("docker: reading the engine's import progress: %w%s", err, seeLog)
		}
		if msg := m.failure(); msg != "" {
			return fmt.Errorf("docker: %s%s", oneLine(msg, maxProgressError), seeLog)
		}
		last = m.Status
	}
	if !strings.HasPrefix(last, "sha256:") {
		return fmt.Errorf("docker: the engine's import progress ended without the image's id, so the import may not have happened%s", seeLog)
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
// import's: the first failure it reports, or an error unless a message
// says an image was loaded.
func loadError(stream []byte) error {
	d := json.NewDecoder(bytes.NewReader(stream))
	loaded := false
	for {
		var m progressMessage
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("docker: reading the engine's load progress: %w%s", err, seeLog)
		}
		if msg := m.failure(); msg != "" {
			return fmt.Errorf("docker: %s%s", oneLine(msg, maxProgressError), seeLog)
		}
		loaded = loaded || strings.HasPrefix(m.Stream, "Loaded image")
	}
	if !loaded {
		return fmt.Errorf("docker: the engine's load progress ended without naming the image loaded, so the load may not have happened%s", seeLog)
	}
	return nil
}

// failure is the error a message reports, or "".
func (m progressMessage) failure() string {
	if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
		return m.ErrorDetail.Message
	}
	return m.Error
}
