package nsinit

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the Pod's trampoline, as
// warden-init does (Main), for BenchmarkPodExec.
func TestMain(m *testing.M) {
	if isBoxed() && len(os.Args) > 1 && os.Args[1] == boxedPodExec {
		os.Exit(podExec(os.Args[2:]))
	}
	os.Exit(m.Run())
}

// BenchmarkPodExec times a Pod's start of a program through the
// trampoline (this test binary run as BoxedPath pod-exec, which sets
// RLIMIT_NPROC, execs, and whose error descriptor the agent reads to its
// end) against a bare exec of the same program, interleaved in one run.
// It reports the trampoline's time per start as a multiple of the bare
// exec's (x-bare). The test binary is larger than warden-init, so its
// start-up, and the figure, err on the high side.
func BenchmarkPodExec(b *testing.B) {
	prog := "/bin/true"
	if _, err := os.Stat(prog); err != nil {
		b.Skipf("no %s to start: %v", prog, err)
	}
	var bare, tramp time.Duration
	for b.Loop() {
		t0 := time.Now()
		if err := exec.Command(prog).Run(); err != nil {
			b.Fatalf("bare exec: %v", err)
		}
		t1 := time.Now()
		startTrampoline(b, prog)
		tramp += time.Since(t1)
		bare += t1.Sub(t0)
	}
	b.ReportMetric(float64(tramp)/float64(bare), "x-bare")
	b.ReportMetric(float64(tramp-bare)/float64(b.N)/1e3, "µs-more/op")
}

// startTrampoline starts prog through the trampoline as the agent does
// (startProcess) and waits for it.
func startTrampoline(b *testing.B, prog string) {
	r, w, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	cmd := &exec.Cmd{Path: "/proc/self/exe", Args: []string{BoxedPath, boxedPodExec, "256", "3", prog, "true"}, ExtraFiles: []*os.File{w}}
	err = cmd.Start()
	w.Close()
	if err != nil {
		b.Fatalf("starting the trampoline: %v", err)
	}
	if st := podStartReport(r, "true", prog); st != nil {
		b.Errorf("the trampoline failed: %s", st.Error)
	}
	if err := cmd.Wait(); err != nil {
		b.Fatalf("the trampoline's program: %v", err)
	}
}
