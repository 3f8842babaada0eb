package plan

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"syscall"
	"testing"
)

// sample is a plan with every kind of argument.
func sample() *Plan {
	p := &Plan{}
	p.Add(Op{Code: Mount, Ints: []uint64{4096 | 16384, 0}, Strs: []string{"/usr", "/tmp/usr", "", ""}, Context: `building the root: binding /usr: mounting "/usr" on "/tmp/usr"`})
	p.Add(Op{Code: Mkdir, Ints: []uint64{0o755, uint64(syscall.EEXIST)}, Strs: []string{"/tmp/etc"}, Context: "building the root: mounting root tmpfs"})
	p.Add(Op{Code: Setrlimit, Ints: []uint64{7, 1024}, Context: "setting rlimits: RLIMIT_NOFILE=1024"})
	p.Add(Op{Code: Exec, Ints: []uint64{1000, 1000}, Strs: []string{"/usr/bin/python3", "/workspace", "python3", "-c", "print(1)"}, Context: "starting the program"})
	p.Add(Op{Code: Env, Context: "the environment"})
	return p
}

func TestRoundTrip(t *testing.T) {
	p := sample()
	b, err := Encode(p)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range p.Ops {
		p.Ops[i].Context = "" // never encoded
	}
	if !reflect.DeepEqual(got, p) {
		t.Errorf("Decode(Encode(p)) = %+v, want %+v", got, p)
	}
}

// TestEncoding pins the bytes of one op, which the C executor reads.
func TestEncoding(t *testing.T) {
	b, err := Encode(&Plan{Ops: []Op{{Code: Chdir, Strs: []string{"/w"}}}})
	if err != nil {
		t.Fatal(err)
	}
	want := []byte("WPLN\x03\x00\x00\x00\x01\x00\x00\x00" + "\x0c\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00" + "\x02\x00\x00\x00/w")
	if !bytes.Equal(b, want) {
		t.Errorf("Encode = %q, want %q", b, want)
	}
}

func TestEncodeRefuses(t *testing.T) {
	tests := []struct {
		name string
		op   Op
		want string
	}{
		{"unknown code", Op{Code: codeEnd}, "unknown op code"},
		{"zero code", Op{Code: 0}, "unknown op code"},
		{"too few ints", Op{Code: Mount, Ints: []uint64{1}, Strs: []string{"a", "b", "c", "d"}}, "has 1 ints"},
		{"too many strs", Op{Code: Chdir, Strs: []string{"a", "b"}}, "has 2 strings"},
		{"NUL", Op{Code: Chdir, Strs: []string{"a\x00b"}}, "NUL"},
		{"exec without argv", Op{Code: Exec, Ints: []uint64{1, 1}, Strs: []string{"/p", "/w"}}, "has 2 strings"},
	}
	for _, tc := range tests {
		_, err := Encode(&Plan{Ops: []Op{tc.op}})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Encode error %v, want one containing %q", tc.name, err, tc.want)
		}
		if _, serr := Size(&Plan{Ops: []Op{tc.op}}); serr == nil || err == nil || serr.Error() != err.Error() {
			t.Errorf("%s: Size error %v, want Encode's %v", tc.name, serr, err)
		}
	}
	if _, err := Encode(&Plan{Ops: make([]Op, MaxOps+1)}); err == nil {
		t.Errorf("Encode of %d ops: no error", MaxOps+1)
	}
	big := strings.Repeat("x", MaxBytes)
	if _, err := Encode(&Plan{Ops: []Op{{Code: Chdir, Strs: []string{big}}}}); err == nil {
		t.Errorf("Encode of a plan over MaxBytes: no error")
	}
}

// TestSize: Size is the length Encode writes, and Encode allocates the
// encoding once, at that size, for a plan far over Encode's first guess.
func TestSize(t *testing.T) {
	env := make([]string, 64)
	for i := range env {
		env[i] = strings.Repeat("e", 1000)
	}
	plans := []*Plan{
		{},
		{Ops: []Op{{Code: Chdir, Strs: []string{"/w"}}}},
		{Ops: []Op{{Code: Env, Strs: env}, {Code: Exec, Ints: []uint64{1, 1}, Strs: []string{"/bin/true", "/w", "true"}}}},
	}
	for i, p := range plans {
		b, err := Encode(p)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := Size(p); err != nil || n != len(b) {
			t.Errorf("plan %d: Size = %d, %v; want %d, nil", i, n, err, len(b))
		}
		if allocs := testing.AllocsPerRun(10, func() { _, _ = Encode(p) }); allocs != 1 {
			t.Errorf("plan %d: Encode allocates %v times, want once", i, allocs)
		}
	}
}

func le32(v uint32) string { return string(binary.LittleEndian.AppendUint32(nil, v)) }

func TestDecodeRefuses(t *testing.T) {
	head := "WPLN" + le32(Version)
	chdir := le32(uint32(Chdir)) + le32(0) + le32(1)
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "magic"},
		{"bad magic", "WPLX" + le32(Version) + le32(0), "magic"},
		{"version", "WPLN" + le32(Version+1) + le32(0), fmt.Sprintf("version %d", Version+1)},
		{"no count", head, "ends early"},
		{"too many ops", head + le32(MaxOps+1), "ops, over"},
		{"missing op", head + le32(1), "ends early"},
		{"unknown code", head + le32(1) + le32(999) + le32(0) + le32(0), "unknown op code 999"},
		{"bad counts", head + le32(1) + le32(uint32(Chdir)) + le32(5) + le32(1), "has 5 ints"},
		{"short string", head + le32(1) + chdir + le32(10) + "abc", "ends early"},
		{"huge string length", head + le32(1) + chdir + le32(0xffffffff), "ends early"},
		{"NUL in string", head + le32(1) + chdir + le32(3) + "a\x00b", "NUL"},
		{"trailing bytes", head + le32(1) + chdir + le32(1) + "/" + "x", "follow the last op"},
		{"short int", head + le32(1) + le32(uint32(Setrlimit)) + le32(2) + le32(0) + "\x01\x02", "ends early"},
	}
	for _, tc := range tests {
		_, err := Decode([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
}

func TestStatusRoundTrip(t *testing.T) {
	for _, s := range []Status{
		{Kind: StatusRan, ExitCode: 3},
		{Kind: StatusRan, ExitCode: 137, Signal: 9},
		{Kind: StatusSetup, Op: 12, Errno: int32(syscall.EPERM)},
		{Kind: StatusExec, Errno: int32(syscall.ENOENT)},
		{Kind: StatusRefused, Op: -1},
		{Kind: StatusLockdown, Op: LockCapset, Errno: int32(syscall.EPERM)},
	} {
		b := s.Encode()
		got, err := DecodeStatus(b[:])
		if err != nil || got != s {
			t.Errorf("DecodeStatus(Encode(%+v)) = %+v, %v", s, got, err)
		}
	}
}

func TestDecodeStatusRefuses(t *testing.T) {
	tests := []struct {
		name string
		in   []byte
	}{
		{"short", make([]byte, StatusSize-1)},
		{"unknown kind", enc(Status{Kind: StatusLockdown + 1})},
		{"lockdown without errno", enc(Status{Kind: StatusLockdown, Op: LockCapset})},
		{"negative exit", enc(Status{Kind: StatusRan, ExitCode: -1})},
		{"exit over 255", enc(Status{Kind: StatusRan, ExitCode: 256})},
		{"setup without errno", enc(Status{Kind: StatusSetup, Op: 1})},
		{"exec without errno", enc(Status{Kind: StatusExec})},
	}
	for _, tc := range tests {
		if s, err := DecodeStatus(tc.in); err == nil {
			t.Errorf("%s: DecodeStatus = %+v, want an error", tc.name, s)
		}
	}
}

func enc(s Status) []byte { b := s.Encode(); return b[:] }

func TestErr(t *testing.T) {
	p := sample()
	tests := []struct {
		st   Status
		want string
		is   error
	}{
		{Status{Kind: StatusRan}, "", nil},
		{Status{Kind: StatusExec, Errno: int32(syscall.ENOENT)}, "", nil},
		{Status{Kind: StatusSetup, Op: 0, Errno: int32(syscall.EPERM)}, `building the root: binding /usr: mounting "/usr" on "/tmp/usr": operation not permitted`, syscall.EPERM},
		{Status{Kind: StatusSetup, Op: 9, Errno: int32(syscall.EPERM)}, "failure at op 9 of a plan of 5", syscall.EPERM},
		{Status{Kind: StatusRefused, Op: 2}, "refused the plan at op 2 (setting rlimits", ErrRefused},
		{Status{Kind: StatusRefused, Op: -1}, "run make build", ErrRefused},
		{Status{Kind: StatusLockdown, Op: LockBounding + 21, Errno: int32(syscall.EPERM)}, "dropping bounding capability 21: operation not permitted", syscall.EPERM},
		{Status{Kind: StatusLockdown, Op: LockAmbient, Errno: int32(syscall.EPERM)}, "clearing ambient capabilities: operation not permitted", syscall.EPERM},
		{Status{Kind: StatusLockdown, Op: LockCapset, Errno: int32(syscall.EPERM)}, "capset: operation not permitted", syscall.EPERM},
		{Status{Kind: StatusLockdown, Op: LockNoNewPrivs, Errno: int32(syscall.EINVAL)}, "setting no_new_privs: invalid argument", syscall.EINVAL},
		{Status{Kind: StatusLockdown, Op: LockFilter, Errno: int32(syscall.EACCES)}, "installing seccomp filter (is no_new_privs set?): permission denied", syscall.EACCES},
		{Status{Kind: StatusLockdown, Op: LockFilter, Errno: int32(syscall.EINVAL)}, "installing seccomp filter: invalid argument", syscall.EINVAL},
		{Status{Kind: StatusLockdown, Op: LockListener, Errno: int32(syscall.EINVAL)}, "the kernel lacks seccomp user notification; use Linux 5.0 or newer", syscall.EINVAL},
		{Status{Kind: StatusLockdown, Op: LockNoFilter, Errno: int32(syscall.EINVAL)}, "no seccomp filter", syscall.EINVAL},
		{Status{Kind: StatusLockdown, Op: 99, Errno: int32(syscall.EPERM)}, "lockdown step 99", syscall.EPERM},
	}
	for _, tc := range tests {
		err := p.Err(tc.st)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Err(%+v) = %v, want nil", tc.st, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Err(%+v) = %v, want one containing %q", tc.st, err, tc.want)
		case tc.is != nil && !errors.Is(err, tc.is):
			t.Errorf("Err(%+v) = %v, not wrapping %v", tc.st, err, tc.is)
		}
	}
}
