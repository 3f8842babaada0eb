package interp

import (
	"bufio"
	"os"
	"strings"
	"testing"
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
		p := newPump(r, nil)
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
		r.Close()
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
