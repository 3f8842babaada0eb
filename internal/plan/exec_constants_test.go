package plan

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestExecutorConstants: the status kinds, lockdown steps, exec steps and
// namespace handshake steps of warden-exec's exec.h are the Go ones, as TestExecutorTable holds the
// op codes of plan.h to ops.go. A C enumerator without "= n" follows the
// one before it.
func TestExecutorConstants(t *testing.T) {
	hdr, err := os.ReadFile(filepath.Join(execSources, "exec.h"))
	if err != nil {
		t.Fatal(err)
	}
	inC := map[string]int64{}
	for _, enum := range regexp.MustCompile(`(?s)enum [a-z_]*\s*\{(.*?)\};`).FindAllSubmatch(hdr, -1) {
		next := int64(0)
		for _, item := range strings.Split(string(enum[1]), ",") {
			name, value, set := strings.Cut(strings.TrimSpace(item), "=")
			if name = strings.TrimSpace(name); name == "" {
				continue
			}
			if set {
				v, err := strconv.ParseInt(strings.TrimSpace(value), 10, 64)
				if err != nil {
					t.Fatalf("exec.h: %s = %q: %v", name, value, err)
				}
				next = v
			}
			inC[name] = next
			next++
		}
	}
	want := map[string]int64{
		"ST_RAN": int64(StatusRan), "ST_SETUP": int64(StatusSetup), "ST_EXEC": int64(StatusExec),
		"ST_REFUSED": int64(StatusRefused), "ST_LOCKDOWN": int64(StatusLockdown),
		"LOCK_BOUNDING": LockBounding, "LOCK_AMBIENT": LockAmbient, "LOCK_CAPSET": LockCapset,
		"LOCK_NO_NEW_PRIVS": LockNoNewPrivs, "LOCK_FILTER": LockFilter, "LOCK_LISTENER": LockListener,
		"LOCK_NO_FILTER": LockNoFilter,
		"EXEC_LOOKUP":    ExecLookup, "EXEC_EXECVE": ExecExecve,
		"STEP_HELLO": StepHello, "STEP_USERNS": StepUserns, "STEP_MAPPED": StepMapped,
		"STEP_NAMESPACES": StepNamespaces, "STEP_CAPS": StepCaps, "STEP_CLONE": StepClone,
	}
	for name, w := range want {
		if got, ok := inC[name]; !ok || got != w {
			t.Errorf("exec.h %s = %d (found %v), want %d as in status.go", name, got, ok, w)
		}
	}
	if len(inC) != len(want) {
		t.Errorf("exec.h has %d enumerators, this test knows %d: add the new ones to it", len(inC), len(want))
	}
}

// TestExecutorHandshakeTags: exec.h spells the namespace handshake's tags
// as unshare.go does, and a hello could never be read as a plan's length.
func TestExecutorHandshakeTags(t *testing.T) {
	hdr, err := os.ReadFile(filepath.Join(execSources, "exec.h"))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"HELLO_TAG": HelloTag, "MAPPED_TAG": MappedTag, "USERNS_TAG": UsernsTag, "PID_TAG": PidTag, "FAILED_TAG": FailedTag,
	} {
		m := regexp.MustCompile(`#define ` + name + ` "([^"]*)"`).FindSubmatch(hdr)
		if m == nil || string(m[1]) != want {
			t.Errorf("exec.h %s = %q, want %q as in unshare.go", name, m, want)
		}
	}
	if n := binary.LittleEndian.Uint32([]byte(HelloTag)); n <= MaxBytes {
		t.Errorf("HelloTag reads as a plan length of %d, within MaxBytes %d: an executor would take it for a plan", n, MaxBytes)
	}
}
