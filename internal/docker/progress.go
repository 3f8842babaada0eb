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
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
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
