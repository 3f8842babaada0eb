package interp

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/warden-sandbox/warden/internal/spec"
)

// request is one run sent to a driver.
type request struct {
	Code      string `json:"code"`
	Token     string `json:"token"`
	MaxOutput int    `json:"max_output"`
	MaxValue  int    `json:"max_value"`
}

// writeJSONRequest sends r as one JSON line, the request format of the
// Python and JavaScript drivers.
func writeJSONRequest(w io.Writer, r request) error {
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// reply is one JSON line from a driver: "ready" once at start, "output"
// for each rich output, "done" at the end of each run. "dropped" is made
// by the host for a line past the size limit.
type reply struct {
	T        string          `json:"t"`
	Value    string          `json:"value"`
	Exc      *spec.Exception `json:"exc"`
	Mime     string          `json:"mime"`
	Data     string          `json:"data"`
	Enc      string          `json:"enc"`
	ExitCode int             `json:"exit_code"`
	size     int
}

// readReplies sends each reply read from r on out until r ends or quit is
// closed, then closes out. Lines longer than max are skipped (read and
// discarded, never held) and reported as "dropped"; a line that is not
// JSON is reported as a reply of type "" so the run can fail.
func readReplies(r io.Reader, max int, out chan<- reply, quit <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, size, err := readLine(br, max)
		if err != nil {
			return
		}
		var rep reply
		if line == nil {
			rep = reply{T: "dropped", size: size}
		} else if json.Unmarshal(line, &rep) != nil {
			rep = reply{}
		}
		select {
		case out <- rep:
		case <-quit:
			return
		}
	}
}

// readLine reads one line without its newline; a line longer than max is
// consumed and returned as nil with its size.
func readLine(br *bufio.Reader, max int) ([]byte, int, error) {
	var line []byte
	size := 0
	for {
		chunk, err := br.ReadSlice('\n')
		size += len(chunk)
		if size <= max+1 {
			line = append(line, chunk...)
		} else {
			line = nil
		}
		switch {
		case err == nil:
			if size > max+1 {
				return nil, size - 1, nil
			}
			return line[:len(line)-1], size - 1, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && size > 0:
			return nil, 0, fmt.Errorf("reply cut short: %w", io.ErrUnexpectedEOF)
		default:
			return nil, 0, err
		}
	}
}
