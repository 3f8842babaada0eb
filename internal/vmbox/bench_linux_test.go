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
		t0 := time.Now()
		sess, times, err := r.start(context.Background(), s)
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range times.steps {
			add(st.name, st.took)
		}
		add("qemu-to-hello", times.vm.ToHello)
		add("kernel-to-init", times.vm.KernelToInit)
		add("init-to-hello", times.vm.InitToHello)
		add("hello-to-ready", times.steps[len(times.steps)-1].took+times.steps[len(times.steps)-2].took)
		t1 := time.Now()
		res, err := sess.Exec(context.Background(), agent.ExecSpec{Command: []string{"/bin/true"}, Timeout: time.Minute}, agent.IO{})
		if err != nil || res.ExitCode != 0 {
			b.Fatalf("exec of /bin/true: %+v, %v", res, err)
		}
		add("exec", time.Since(t1))
		add("start-to-exit", time.Since(t0))
		t2 := time.Now()
		if err := sess.Close(); err != nil {
			b.Fatal(err)
		}
		add("close", time.Since(t2))
		add("total", time.Since(t0))
		b.Logf("boot (ms):%s", row.String()) // each boot, for medians across runs (-test.v)
	}
	for _, name := range order {
		b.ReportMetric(median(took[name]), "p50-"+name+"-ms")
	}
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

// median is the middle of d, in milliseconds.
func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}
