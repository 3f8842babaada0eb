package plan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// decodeHarness builds testdata/decode_harness.c with warden-exec's
// decoder and the address and undefined-behaviour sanitizers.
func decodeHarness(t *testing.T) string {
	t.Helper()
	cc, err := exec.LookPath("gcc")
	if err != nil {
		executor(t) // skips or fails as the executor tests do
	}
	bin := filepath.Join(t.TempDir(), "decode-harness")
	args := []string{"-O1", "-g", "-Wall", "-Wextra", "-Werror", "-fsanitize=address,undefined", "-fno-sanitize-recover=all",
		"-I", execSources, "-o", bin, "testdata/decode_harness.c", filepath.Join(execSources, "plan.c")}
	if out, err := exec.Command(cc, args...).CombinedOutput(); err != nil {
		t.Fatalf("building the decode harness: %v: %s", err, out)
	}
	return bin
}

// everyOp is a plan with one op of each code, at its least counts.
func everyOp() *Plan {
	p := &Plan{}
	for c := Code(1); c < codeEnd; c++ {
		t := table[c]
		op := Op{Code: c, Ints: make([]uint64, t.minInts), Strs: make([]string, t.minStrs)}
		for i := range op.Ints {
			op.Ints[i] = uint64(i) * 0x0101010101010101
		}
		for i := range op.Strs {
			op.Strs[i] = strings.Repeat("s", i+1)
		}
		p.Add(op)
	}
	return p
}

// mutate changes b the ways a fuzzer would: flipped bits, interesting
// values over a u32, cut or grown tails, and bytes copied from elsewhere.
func mutate(r *rand.Rand, b []byte) []byte {
	b = bytes.Clone(b)
	for range 1 + r.IntN(4) {
		if len(b) == 0 {
			b = append(b, byte(r.IntN(256)))
			continue
		}
		switch i := r.IntN(len(b)); r.IntN(6) {
		case 0:
			b[i] ^= 1 << r.IntN(8)
		case 1:
			if i+4 <= len(b) {
				vals := []uint32{0, 1, 2, 3, 0x7f, 0xff, 0xffff, MaxInts, MaxInts + 1, MaxStrs + 1, MaxOps + 1, MaxBytes, 1<<31 - 1, 1 << 31, ^uint32(0)}
				binary.LittleEndian.PutUint32(b[i:], vals[r.IntN(len(vals))])
			}
		case 2:
			b = b[:i]
		case 3:
			b = append(b, b[i:min(len(b), i+1+r.IntN(32))]...)
		case 4:
			j := r.IntN(len(b))
			n := min(r.IntN(16), len(b)-i, len(b)-j)
			copy(b[i:i+n], b[j:j+n])
		case 5:
			b = append(b[:i], append([]byte{byte(r.IntN(256))}, b[i:]...)...)
		}
	}
	return b
}

var opIndex = regexp.MustCompile(`^op (\d+): `)

// goVerdict is what the C harness must print for b: "ok N", or "bad I"
// with I the op Go stopped at (when Go names one; else only "bad").
func goVerdict(b []byte) string {
	p, err := Decode(b)
	if err == nil {
		return fmt.Sprintf("ok %d", len(p.Ops))
	}
	if m := opIndex.FindStringSubmatch(err.Error()); m != nil {
		return "bad " + m[1]
	}
	return "bad"
}

// TestDecodeAsGo feeds FuzzDecode's seeds, a plan with every op and
// thousands of their mutations (a fixed seed, so a failure repeats) to
// warden-exec's decoder under the sanitizers: it must never read out of
// bounds, and must accept exactly what Go's Decode accepts, stopping at
// the same op.
func TestDecodeAsGo(t *testing.T) {
	bin := decodeHarness(t)
	good, err := Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	all, err := Encode(everyOp())
	if err != nil {
		t.Fatal(err)
	}
	seeds := [][]byte{good, all,
		[]byte("WPLN\x02\x00\x00\x00\x00\x00\x00\x00"),
		[]byte("WPLN\x02\x00\x00\x00\x01\x00\x00\x00\x0a\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00\xff\xff\xff\xff")}
	if dir, err := os.ReadDir("testdata/fuzz/FuzzDecode"); err == nil {
		t.Logf("the fuzz corpus has %d files; only the seeds above are fed", len(dir))
	}
	r := rand.New(rand.NewPCG(20, 31))
	inputs := append([][]byte{}, seeds...)
	for range 4000 {
		inputs = append(inputs, mutate(r, seeds[r.IntN(len(seeds))]))
	}
	var stdin bytes.Buffer
	for _, in := range inputs {
		stdin.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(in))))
		stdin.Write(in)
	}
	cmd := exec.Command(bin)
	cmd.Stdin = &stdin
	cmd.Env = []string{"ASAN_OPTIONS=detect_leaks=1"}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("the harness: %v: %s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("the harness answered %d of %d inputs", len(lines), len(inputs))
	}
	accepted := 0
	for i, in := range inputs {
		want, got := goVerdict(in), lines[i]
		if strings.HasPrefix(want, "ok") {
			accepted++
		}
		if want == "bad" && strings.HasPrefix(got, "bad ") {
			continue // Go names no op (the header, trailing bytes)
		}
		if got != want {
			t.Errorf("input %d (%s): C %q, Go %q", i, strconv.Quote(string(in[:min(len(in), 64)])), got, want)
		}
	}
	t.Logf("%d inputs, %d accepted by both", len(inputs), accepted)
}
