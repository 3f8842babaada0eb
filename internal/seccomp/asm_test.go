package seccomp

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/bpf"
)

func TestAsmResolvesLabels(t *testing.T) {
	var a asm
	a.load(offNr)
	a.jump("nr == 1", bpf.JumpEqual, 1, "yes", "")
	a.jump("nr == 2", bpf.JumpEqual, 2, "", "no")
	a.label("yes")
	a.ret(retAllow)
	a.label("no")
	a.ret(retErrno | eperm)
	prog, err := a.assemble()
	if err != nil {
		t.Fatalf("assemble() error: %v", err)
	}
	want := []bpf.JumpIf{
		{Cond: bpf.JumpEqual, Val: 1, SkipTrue: 1},
		{Cond: bpf.JumpEqual, Val: 2, SkipFalse: 1},
	}
	for i, w := range want {
		if got := prog[1+i]; got != w {
			t.Errorf("instruction %d = %#v, want %#v", 1+i, got, w)
		}
	}
	wantListing := []string{
		"A = nr",
		"if nr == 1 goto 3",
		"if nr == 2 goto 3 else 4",
		"return ALLOW",
		"return ERRNO(EPERM)",
	}
	if diff := cmp.Diff(wantListing, a.listing()); diff != "" {
		t.Errorf("listing mismatch (-want +got):\n%s", diff)
	}
}

func TestAsmErrors(t *testing.T) {
	tests := []struct {
		name  string
		build func(a *asm)
		want  string
	}{
		{
			name: "missing label",
			build: func(a *asm) {
				a.jump("A == 1", bpf.JumpEqual, 1, "nowhere", "")
				a.ret(retAllow)
			},
			want: "never placed",
		},
		{
			name: "backward jump",
			build: func(a *asm) {
				a.label("back")
				a.load(offNr)
				a.jump("A == 1", bpf.JumpEqual, 1, "back", "")
				a.ret(retAllow)
			},
			want: "out of range",
		},
		{
			name: "jump too far",
			build: func(a *asm) {
				a.jump("A == 1", bpf.JumpEqual, 1, "far", "")
				for range 256 {
					a.load(offNr)
				}
				a.label("far")
				a.ret(retAllow)
			},
			want: "out of range",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var a asm
			tt.build(&a)
			_, err := a.assemble()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("assemble() error = %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// TestFieldName checks the names the generated program's comments give
// the words of struct seccomp_data, including an argument's high word,
// which only pointer tests load.
func TestFieldName(t *testing.T) {
	tests := []struct {
		off  uint32
		want string
	}{
		{offNr, "nr"},
		{offArch, "arch"},
		{argLow(0), "args[0]"},
		{argLow(2), "args[2]"},
		{argHigh(2), "args[2] >> 32"},
		{argHigh(5), "args[5] >> 32"},
		{8, "seccomp_data[8]"}, // instruction_pointer
	}
	for _, tt := range tests {
		if got := fieldName(tt.off); got != tt.want {
			t.Errorf("fieldName(%d) = %q, want %q", tt.off, got, tt.want)
		}
	}
}
