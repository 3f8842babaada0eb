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
	Error       string `json:"error"`
	ErrorDetail *struct {
		Message string `json:"message"`
	} `json:"errorDetail"`
}

// maxProgressError bounds how much of the engine's error goes into ours.
const maxProgressError = 512

// progressError reads a progress stream to its end and returns the first
// failure it reports, as one line; a stream that is not a sequence of
// JSON objects is an error too, since then nothing says the work is done.
func progressError(stream []byte) error {
	d := json.NewDecoder(bytes.NewReader(stream))
	for {
		var m progressMessage
		err := d.Decode(&m)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("docker: reading the engine's progress stream: %w", err)
		}
		msg := m.Error
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			msg = m.ErrorDetail.Message
		}
		if msg != "" {
			return fmt.Errorf("docker: %s", oneLine(msg, maxProgressError))
		}
	}
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
