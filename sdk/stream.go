package sdk

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// MaxStreamLine bounds one line of a streamed exec. Output events are small
// chunks, but the final result line carries the whole Result (both output
// streams up to the output limit, plus rich outputs), so the bound is
// generous; it exists so a broken or hostile server cannot make the
// client buffer without end.
const MaxStreamLine = 64 << 20

// Stream runs req like Exec, but calls fn with each stdout and stderr event
// as the output happens, for live progress. It returns the final Result;
// an error event ending the stream becomes an *APIError. If fn returns an
// error, Stream stops reading, drops the connection and returns fn's
// error unchanged. fn may be nil.
func (s *Session) Stream(ctx context.Context, req ExecRequest, fn func(Event) error) (*Result, error) {
	op := "streaming exec in session " + s.id
	resp, err := s.c.api.StreamExecInSession(ctx, s.id, req)
	if err := check(op, resp, err, http.StatusOK); err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return readEvents(resp.Body, fn, op)
}

// readEvents parses an NDJSON event stream until its final event. Every
// event before the final one goes to fn, including types added to the API
// after this client was built, so old clients pass new events through.
func readEvents(r io.Reader, fn func(Event) error, op string) (*Result, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxStreamLine)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var ev Event
		if err := json.Unmarshal(line, &ev); err != nil {
			return nil, fmt.Errorf("warden: %s: decoding event: %w", op, err)
		}
		switch ev.Type {
		case EventTypeResult:
			if ev.Result == nil {
				return nil, fmt.Errorf("warden: %s: result event without a result", op)
			}
			return ev.Result, nil
		case EventTypeError:
			if ev.Error == nil {
				return nil, fmt.Errorf("warden: %s: error event without an error", op)
			}
			return nil, &APIError{StatusCode: http.StatusOK, Code: ev.Error.Code, Message: ev.Error.Message}
		}
		if fn != nil {
			if err := fn(ev); err != nil {
				return nil, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("warden: %s: %w", op, err)
	}
	return nil, fmt.Errorf("warden: %s: stream ended without a result: %w", op, io.ErrUnexpectedEOF)
}
