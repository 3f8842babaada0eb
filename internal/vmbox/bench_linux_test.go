package vmbox

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/agent"
	"github.com/warden-sandbox/warden/internal/microvm"
	"github.com/warden-sandbox/warden/internal/nsinit"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/testhost"
)

// BenchmarkStart is a cold `--backend microvm -- true` split into its
// steps: it starts boxes as the backend does (each a new VM), runs
// /bin/true in each, ends it, and reports the median of every step of
// the start (phases), of the VM's own split of the boot, of the exec and
// of the end (-test.v logs every boot's figures). The guest's /init is the warden-init beside the test
// binary, so build both into bin/:
//
//	make build && go test -c -o bin/vmbox.test ./internal/vmbox &&
//	bin/vmbox.test -test.run '^$' -test.bench Start -test.benchtime 10x
func BenchmarkStart(b *testing.B) {
	needBoxes(b)
	r := &Runtime{}
	s := spec.Spec{Limits: spec.DefaultLimits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
	took := map[string][]time.Duration{}
	var order []string
	var row strings.Builder
	add := func(name string, d time.Duration) {
		if _, ok := took[name]; !ok {
			order = append(order, name)
		}
		took[name] = append(took[name], d)
		fmt.Fprintf(&row, " %s=%.1f", name, float64(d.Microseconds())/1000)
	}
	for b.Loop() {
		row.Reset()
		bootOnce(b, r, s, add)
		b.Logf("boot (ms):%s", row.String()) // each boot, for medians across runs (-test.v)
	}
	for _, name := range order {
		b.ReportMetric(median(took[name]), "p50-"+name+"-ms")
	}
}

// bootOnce starts one box, runs /bin/true in it and ends it, passing
// each step's time to add. A failure after the start closes the box on
// the way out (b.Fatal runs deferred calls), so no VM outlives the
// benchmark.
func bootOnce(b *testing.B, r *Runtime, s spec.Spec, add func(string, time.Duration)) {
	t0 := time.Now()
	sess, times, err := r.start(context.Background(), s)
	if err != nil {
		b.Fatal(err)
	}
	open := true
	defer func() {
		if !open {
			return
		}
		if err := sess.Close(); err != nil {
			b.Errorf("closing the box after a failure: %v", err)
		}
	}()
	for _, st := range times.steps {
		add(st.name, st.took)
	}
	add("qemu-to-hello", times.vm.ToHello)
	add("kernel-to-init", times.vm.KernelToInit)
	add("init-to-hello", times.vm.InitToHello)
	add("hello-to-ready", stepTook(b, times, "handover")+stepTook(b, times, "attach"))
	t1 := time.Now()
	res, err := sess.Exec(context.Background(), agent.ExecSpec{Command: []string{"/bin/true"}, Timeout: time.Minute}, agent.IO{})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("exec of /bin/true: %+v, %v", res, err)
	}
	add("exec", time.Since(t1))
	add("start-to-exit", time.Since(t0))
	t2 := time.Now()
	open = false
	if err := sess.Close(); err != nil {
		b.Fatal(err)
	}
	add("close", time.Since(t2))
	add("total", time.Since(t0))
}

// needBoxes skips (a failure under WARDEN_CI=1) unless this host can boot
// the backend's boxes: root, QEMU that can be confined, the guest kernel,
// and warden-init beside this test binary.
func needBoxes(t testing.TB) {
	t.Helper()
	testhost.RequireRoot(t)
	testhost.RequireTool(t, "qemu-system-x86_64")
	if err := microvm.CheckConfinement(); err != nil {
		testhost.SkipOrFail(t, "QEMU cannot be confined here: "+err.Error())
	}
	if _, _, err := microvm.GuestKernel(microvm.HostAccel().Accel); err != nil {
		testhost.SkipOrFail(t, "no microVM guest kernel to boot: "+err.Error())
	}
	if p, err := nsinit.BinaryPath(); err != nil || filepath.Base(p) != nsinit.InitName {
		testhost.SkipOrFail(t, "the guest's /init is the warden-init beside the test binary: build the test with go test -c -o bin/vmbox.test after make build")
	}
}

// stepTook is how long the start's step name took, failing the benchmark
// if the start has no such step (phases' names changed).
func stepTook(b *testing.B, times *phases, name string) time.Duration {
	b.Helper()
	for _, st := range times.steps {
		if st.name == name {
			return st.took
		}
	}
	b.Fatalf("the start has no step %q", name)
	return 0
}

// median is the middle of d, in milliseconds: the mean of the two middle
// values when d has an even count.
func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + m) / 2
	}
	return float64(m.Microseconds()) / 1000
}

// TestMedian: BenchmarkStart's median is the middle value, or the mean of
// the two middle ones for an even count (two boots are not their max).
func TestMedian(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		in   []time.Duration
		want float64
	}{
		{[]time.Duration{5 * ms}, 5},
		{[]time.Duration{9 * ms, 1 * ms, 5 * ms}, 5},
		{[]time.Duration{2 * ms, 6 * ms}, 4},
		{[]time.Duration{7 * ms, 1 * ms, 3 * ms, 100 * ms}, 5},
	} {
		if got := median(tc.in); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
