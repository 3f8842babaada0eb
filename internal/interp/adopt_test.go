package interp

import (
	"context"
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// restoredAdopter plays a restored sandbox for Adopt: on the files it
// is given it starts a bash driver as a checkpointed session had, whose
// ready reply went to that session long ago and so never reaches the
// new pipes (a sed drops it). It records what it was asked.
type restoredAdopter struct {
	sp        hostSpawner
	err       error
	id        uint64
	nfiles    int
	nullStdin bool
}

func (a *restoredAdopter) Adopt(id uint64, files []*os.File) (Process, error) {
	a.id, a.nfiles, a.nullStdin = id, len(files), isDevNull(files[0])
	if a.err != nil {
		return nil, a.err
	}
	argv := append([]string{"bash", "-c", `exec 5>&4; "$@" 4> >(exec sed -u 1d >&5)`, "restored", bashLanguage.program}, bashLanguage.args...)
	return a.sp.Spawn(context.Background(), Command{Argv: argv, Env: testEnv, Files: files})
}

func isDevNull(f *os.File) bool {
	var st unix.Stat_t
	return unix.Fstat(int(f.Fd()), &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFCHR && st.Rdev == unix.Mkdev(1, 3)
}

// TestAdopt: Adopt binds new pipes to the process it names (stdin
// /dev/null, as the driver's had reached end of file) and Runs talk to
// it without waiting for a ready it sent long ago; its state persists
// from Run to Run; once it dies, the next Run starts a fresh driver
// through the spawner.
func TestAdopt(t *testing.T) {
	ad := &restoredAdopter{sp: hostSpawner{dir: t.TempDir()}}
	it, err := Adopt("bash", ad.sp, ad, 7, testEnv)
	if err != nil {
		t.Fatalf("Adopt() = %v", err)
	}
	t.Cleanup(func() { it.Close() })
	if ad.id != 7 || ad.nfiles != 5 || !ad.nullStdin {
		t.Errorf("the adopter got process %d with %d files (stdin /dev/null %v), want 7 with 5, /dev/null", ad.id, ad.nfiles, ad.nullStdin)
	}
	if r := mustRun(t, it, "x=41; echo adopted"); r.stdout != "adopted\n" || r.Started {
		t.Errorf("the first Run = %q (started %v), want adopted from the adopted driver", r.stdout, r.Started)
	}
	if r := mustRun(t, it, "echo $((x+1))"); r.stdout != "42\n" {
		t.Errorf("a second Run = %q, want 42: the driver's state kept", r.stdout)
	}
	if r := mustRun(t, it, "kill -KILL $$"); !r.Restarted {
		t.Errorf("a Run that killed the driver = %+v, want it restarted", r.Outcome)
	}
	if r := mustRun(t, it, `echo "${x:-none}"`); r.stdout != "none\n" || !r.Started {
		t.Errorf("a Run after the driver died = %q (started %v), want none from a fresh one", r.stdout, r.Started)
	}
}

// TestAdoptRefused: an adoption the adopter refuses, or a language this
// package does not know, fails Adopt with the cause.
func TestAdoptRefused(t *testing.T) {
	ad := &restoredAdopter{sp: hostSpawner{dir: t.TempDir()}, err: syscall.ESRCH}
	if _, err := Adopt("bash", ad.sp, ad, 9, testEnv); !errors.Is(err, syscall.ESRCH) || !strings.Contains(err.Error(), "adopting bash process 9") {
		t.Errorf("Adopt() refused = %v, want the adopter's error naming process 9", err)
	}
	if _, err := Adopt("cobol", ad.sp, ad, 9, testEnv); !errors.Is(err, ErrUnknownLanguage) {
		t.Errorf("Adopt(cobol) = %v, want ErrUnknownLanguage", err)
	}
}
