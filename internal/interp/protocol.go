package interp

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sync"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/strictjson"
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
// by the host for a line past the size limit. The driver runs the
// sandbox's code, so every field is hostile: the run checks and clips each
// one before it keeps it.
type reply struct {
	T        string          `json:"t"`
	Value    string          `json:"value"`
	Exc      *spec.Exception `json:"exc"`
	Mime     string          `json:"mime"`
	Data     string          `json:"data"`
	Enc      string          `json:"enc"`
	ExitCode int             `json:"exit_code"`
	// size is the length of a line past the limit: a "dropped" reply, or
	// a "done" one whose fields were dropped.
	size int
	// err is why a line could not be decoded: the reply is then a broken
	// protocol, whatever its fields.
	err error
}

// Bounds on reading replies.
const (
	// replySlack is what a reply line may hold besides its data, value and
	// exception: the JSON syntax, the MIME type, the encoding.
	replySlack = 64 << 10
	// lineHead is how much of a line past the limit is kept, to tell a
	// "done" reply that ends the run from one that does not.
	lineHead = 64
)

// maxReplyLine returns the longest reply line the host reads for cfg: an
// output of maxOutput bytes with room for JSON escapes, or a value and an
// exception's three fields of maxValue each. Longer lines are dropped
// unread, so one line never costs more than this.
func maxReplyLine(cfg config) int {
	return cfg.maxOutput + cfg.maxOutput/3 + 4*cfg.maxValue + replySlack
}

// doneHead matches the start of a "done" reply as the drivers write it
// ("t" first), so a done reply too long to read still ends the run.
var doneHead = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\{\s*"t"\s*:\s*"done"`) })

// readReplies sends each reply read from r on out until r ends or quit is
// closed, then closes out. Lines longer than max are skipped (read and
// discarded, never held) and reported as "dropped", or as a "done" with no
// fields when they start as one; a line that does not decode is reported as a
// reply with its err set so the run can fail.
func readReplies(r io.Reader, max int, out chan<- reply, quit <-chan struct{}) {
	defer close(out)
	br := bufio.NewReaderSize(r, 64<<10)
	for {
		line, size, err := readLine(br, max)
		if err != nil {
			return
		}
		var rep reply
		switch {
		case size > max && doneHead().Match(line):
			rep = reply{T: "done", size: size}
		case size > max:
			rep = reply{T: "dropped", size: size}
		default:
			if err := decodeReply(line, &rep); err != nil {
				rep = reply{err: err}
			}
		}
		select {
		case out <- rep:
		case <-quit:
			return
		}
	}
}

// decodeReply decodes one reply line, refusing fields no driver writes: a
// line the drivers would never send is a broken protocol, not a partial
// reply.
func decodeReply(line []byte, rep *reply) error {
	return strictjson.Decode(line, rep)
}

// readLine reads one line and returns it without its newline, with its
// size. A line longer than max is consumed without being held: only its
// first lineHead bytes are returned.
func readLine(br *bufio.Reader, max int) ([]byte, int, error) {
	var line []byte
	size := 0
	for {
		chunk, err := br.ReadSlice('\n')
		prev := size
		size += len(chunk)
		switch {
		case size <= max+1:
			line = append(line, chunk...)
		case prev <= max+1:
			line = head(line, chunk)
		}
		switch {
		case err == nil:
			if size > max+1 {
				return bytes.TrimSuffix(line, []byte{'\n'}), size - 1, nil
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

// head returns a copy of the first lineHead bytes of a followed by b.
func head(a, b []byte) []byte {
	h := make([]byte, 0, lineHead)
	h = append(h, a[:min(len(a), lineHead)]...)
	return append(h, b[:min(len(b), lineHead-len(h))]...)
}
