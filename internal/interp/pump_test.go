package interp

import (
	"bufio"
	"os"
	"strings"
	"testing"
	"time"
)

func TestPartialSuffix(t *testing.T) {
	tests := []struct {
		b, token string
		want     int
	}{
		{"hello", "END", 0},
		{"helloE", "END", 1},
		{"helloEN", "END", 2},
		{"helloEND", "END", 0},
		{"E", "END", 1},
		{"", "END", 0},
		{"xEEN", "EEND", 3},
	}
	for _, tt := range tests {
		if got := partialSuffix([]byte(tt.b), []byte(tt.token)); got != tt.want {
			t.Errorf("partialSuffix(%q, %q) = %d, want %d", tt.b, tt.token, got, tt.want)
		}
	}
}

// TestPumpSplitToken feeds the stream in every split of the token and
// checks the run gets exactly the bytes before it, and later bytes are
// dropped.
func TestPumpSplitToken(t *testing.T) {
	const token = "<TOKEN>"
	stream := "out<TOK" + token + "after"
	for cut := 0; cut <= len(stream); cut++ {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		p, err := newPump(r, nil, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var sink syncBuffer
		found := p.arm(token, &sink)
		p.feed([]byte(stream[:cut]))
		p.feed([]byte(stream[cut:]))
		select {
		case <-found:
		default:
			t.Errorf("cut %d: token not found", cut)
		}
		if got := sink.String(); got != "out<TOK" {
			t.Errorf("cut %d: sink got %q, want %q", cut, got, "out<TOK")
		}
		w.Close()
		<-p.eof
		p.close()
	}
}

func TestReadLine(t *testing.T) {
	long := strings.Repeat("z", 100<<10)
	tests := []struct {
		name, in string
		max      int
		want     []string // "!" and its head marks a dropped line
	}{
		{"short", "a\nbb\n", 10, []string{"a", "bb"}},
		{"at limit", "abcd\nx\n", 4, []string{"abcd", "x"}},
		{"over limit", "abcde\nx\n", 4, []string{"!abcde", "x"}},
		{"over buffer", long + "\nx\n", 1 << 10, []string{"!" + long[:lineHead], "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 16)
			var got []string
			for {
				line, size, err := readLine(br, tt.max)
				if err != nil {
					break
				}
				if size > tt.max {
					line = append([]byte("!"), line...)
				}
				got = append(got, string(line))
			}
			if strings.Join(got, "|") != strings.Join(tt.want, "|") {
				t.Errorf("lines %.200q, want %.200q", got, tt.want)
			}
		})
	}
}

// fullAfter keeps the first n bytes written and then reports Full, as the
// sandbox's output limit does.
type fullAfter struct {
	syncBuffer
	n int
}

func (f *fullAfter) Write(p []byte) (int, error) {
	if room := f.n - len(f.String()); room > 0 {
		return f.syncBuffer.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

func (f *fullAfter) Full() bool { return len(f.String()) >= f.n }

// TestPumpPacesPastFullSink floods a run whose writer is Full after a few
// bytes: the writer must complete, the token must still be found, the sink
// must get exactly what it keeps, and once it is full the pump must read
// only at the pace (in large pieces), not as an ordinary reader.
func TestPumpPacesPastFullSink(t *testing.T) {
	const token, limit, flood = "<TOKEN>", 1000, 16 << 20
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	p, err := newPump(r, nil, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	sink := &fullAfter{n: limit}
	found := p.arm(token, sink)
	wrote := make(chan error, 1)
	go func() {
		defer w.Close()
		chunk := []byte(strings.Repeat("y\n", 32<<10))
		for written := 0; written < flood; written += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				wrote <- err
				return
			}
		}
		_, err := w.Write([]byte(token + "after"))
		wrote <- err
	}()
	for what, c := range map[string]<-chan struct{}{"the token was not found": found, "the stream did not end": p.eof} {
		select {
		case <-c:
		case <-time.After(time.Minute):
			t.Fatalf("a minute after a %d-byte flood began, %s", flood, what)
		}
	}
	if err := <-wrote; err != nil {
		t.Errorf("writing the flood: %v", err)
	}
	if got := sink.String(); got != strings.Repeat("y\n", limit/2) {
		t.Errorf("the sink got %d bytes, want exactly its %d", len(got), limit)
	}
	if max := int64(limit + pumpChunk); p.readKeeping > max {
		t.Errorf("read %d bytes as an ordinary reader, want at most %d: past the full sink the pump must pace", p.readKeeping, max)
	}
}
