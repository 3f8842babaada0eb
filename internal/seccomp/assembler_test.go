package seccomp

import (
	"fmt"
	"math"

	"golang.org/x/net/bpf"
)

// asm builds a classic BPF program whose jumps name labels instead of
// hand-counted skips, so the rules in build_test.go read top to bottom and an
// edit cannot silently shift a jump. Only forward jumps exist in classic BPF;
// a label must be placed after every jump to it, within 255 instructions
// (the width of a conditional jump's offset). assemble reports a violation
// instead of truncating an offset.
//
// It lives in a test file: it runs only when the tests check the policy and
// when TestGenerateProgram writes zprogram_linux.go, never in Warden itself.
type asm struct {
	prog   []bpf.Instruction
	notes  []string       // per instruction: what a jump tests, for listing
	labels map[string]int // label -> index of the instruction it marks
	jumps  []pendingJump
}

// pendingJump is a conditional jump whose targets are resolved by assemble.
type pendingJump struct {
	at     int
	jt, jf string // "" means the next instruction
}

// load loads the 32-bit word at off in struct seccomp_data into A.
func (a *asm) load(off uint32) {
	a.emit(bpf.LoadAbsolute{Off: off, Size: 4}, "")
}

// jump compares A with val and continues at jt if cond holds, else at jf.
// test says in words what is compared, such as "nr == openat" or
// "args[1] == TIOCSTI"; it becomes the instruction's comment in the
// generated program.
func (a *asm) jump(test string, cond bpf.JumpTest, val uint32, jt, jf string) {
	a.jumps = append(a.jumps, pendingJump{at: len(a.prog), jt: jt, jf: jf})
	a.emit(bpf.JumpIf{Cond: cond, Val: val}, test)
}

// oneOf compares A with each of vals in turn (arg names the word loaded,
// such as "args[2]"), continuing at match on the first equal and at miss
// after the last: a rule's list of allowed values. An empty list would
// emit no check and fall through to whatever follows (fail open), so it
// panics, as a duplicate label does.
func (a *asm) oneOf(arg string, vals []namedVal, match, miss string) {
	if len(vals) == 0 {
		panic("seccomp assembler: oneOf(" + arg + ") with no values would allow every value")
	}
	for i, v := range vals {
		jf := ""
		if i == len(vals)-1 {
			jf = miss
		}
		a.jump(arg+" == "+v.name, bpf.JumpEqual, v.val, match, jf)
	}
}

// verdicts places rule's two ends, the labels rule.allow, which allows
// the call, and rule.deny, which refuses it with EPERM.
func (a *asm) verdicts(rule string) {
	a.label(rule + ".allow")
	a.ret(retAllow)
	a.label(rule + ".deny")
	a.ret(retErrno | eperm)
}

// ret ends the filter with a seccomp action.
func (a *asm) ret(action uint32) {
	a.emit(bpf.RetConstant{Val: action}, "")
}

func (a *asm) emit(ins bpf.Instruction, note string) {
	a.prog = append(a.prog, ins)
	a.notes = append(a.notes, note)
}

// label marks the next instruction as name.
func (a *asm) label(name string) {
	if a.labels == nil {
		a.labels = make(map[string]int)
	}
	if _, dup := a.labels[name]; dup {
		// Programming error in this package, caught by every test.
		panic(fmt.Sprintf("seccomp: label %q placed twice", name))
	}
	a.labels[name] = len(a.prog)
}

// assemble resolves every jump and returns the finished program.
func (a *asm) assemble() ([]bpf.Instruction, error) {
	for _, j := range a.jumps {
		jt, err := a.skip(j.at, j.jt)
		if err != nil {
			return nil, err
		}
		jf, err := a.skip(j.at, j.jf)
		if err != nil {
			return nil, err
		}
		ins := a.prog[j.at].(bpf.JumpIf)
		ins.SkipTrue, ins.SkipFalse = jt, jf
		a.prog[j.at] = ins
	}
	return a.prog, nil
}

// skip returns how many instructions a jump at index at must skip to land
// on label.
func (a *asm) skip(at int, label string) (uint8, error) {
	if label == "" {
		return 0, nil
	}
	dest, ok := a.labels[label]
	if !ok {
		return 0, fmt.Errorf("resolving jump at %d: label %q never placed", at, label)
	}
	n := dest - at - 1
	if n < 0 || n > math.MaxUint8 {
		return 0, fmt.Errorf("resolving jump at %d to %q: offset %d out of range 0..255", at, label, n)
	}
	return uint8(n), nil
}

// listing describes each instruction of the assembled program in a few
// words, with absolute jump targets, for the comments of the generated
// program: "A = nr", "if nr == clone goto 40 else 51", "return ALLOW". A
// jump that falls through when its test fails omits the else.
func (a *asm) listing() []string {
	out := make([]string, len(a.prog))
	for i, ins := range a.prog {
		switch ins := ins.(type) {
		case bpf.LoadAbsolute:
			out[i] = "A = " + fieldName(ins.Off)
		case bpf.JumpIf:
			out[i] = fmt.Sprintf("if %s goto %d", a.notes[i], i+1+int(ins.SkipTrue))
			if ins.SkipFalse != 0 {
				out[i] += fmt.Sprintf(" else %d", i+1+int(ins.SkipFalse))
			}
		case bpf.RetConstant:
			out[i] = "return " + actionName(ins.Val)
		default:
			out[i] = fmt.Sprintf("%v", ins)
		}
	}
	return out
}

// fieldName names the word of struct seccomp_data at off.
func fieldName(off uint32) string {
	switch {
	case off == offNr:
		return "nr"
	case off == offArch:
		return "arch"
	case off >= offArgs && (off-offArgs)%8 == 0:
		return fmt.Sprintf("args[%d]", (off-offArgs)/8)
	case off >= offArgs && (off-offArgs)%8 == 4:
		return fmt.Sprintf("args[%d] >> 32", (off-offArgs)/8)
	}
	return fmt.Sprintf("seccomp_data[%d]", off)
}
