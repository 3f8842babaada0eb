package microvm

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// BenchmarkBoot boots VMs to the guest's hello (run with -benchtime 20x
// for the p50/p99 the docs quote) and reports where the time went: the
// guest kernel until /init (by its clock), /init to its hello, and the
// rest (QEMU's start and the kernel's boot before its clock runs).
func BenchmarkBoot(b *testing.B) {
	needQEMU(b)
	cfg := testConfig(b)
	var total, kernel, initPart []time.Duration
	for b.Loop() {
		vm, err := Start(context.Background(), cfg)
		if err != nil {
			b.Fatal(err)
		}
		total = append(total, vm.Boot().ToHello)
		kernel = append(kernel, vm.Boot().KernelToInit)
		initPart = append(initPart, vm.Boot().InitToHello)
		closeVM(b, vm)
	}
	b.ReportMetric(ms(pct(total, 50)), "p50-hello-ms")
	b.ReportMetric(ms(pct(total, 99)), "p99-hello-ms")
	b.ReportMetric(ms(pct(kernel, 50)), "p50-kernel-to-init-ms")
	b.ReportMetric(ms(pct(initPart, 50)), "p50-init-to-hello-ms")
}

// BenchmarkIdlePSS reports QEMU's proportional set size with an idle
// guest, at two memory sizes.
func BenchmarkIdlePSS(b *testing.B) {
	needQEMU(b)
	cfg := testConfig(b)
	for _, mib := range []int{128, 256} {
		b.Run(fmt.Sprintf("mem=%d", mib), func(b *testing.B) {
			cfg.MemoryMiB = mib
			var kib int
			for b.Loop() {
				vm, err := Start(context.Background(), cfg)
				if err != nil {
					b.Fatal(err)
				}
				time.Sleep(time.Second) // let the guest settle idle
				kib = pssKiB(b, vm.Pid())
				closeVM(b, vm)
			}
			b.ReportMetric(float64(kib)/1024, "pss-MiB")
		})
	}
}

// BenchmarkPortRoundTrip sends one byte to the guest and reads its echo:
// the agent stream's latency floor. Baseline: the same over a host
// socketpair, so the ratio shows what the VM adds.
func BenchmarkPortRoundTrip(b *testing.B) {
	b.Run("socketpair", func(b *testing.B) {
		h, g, err := socketPair()
		if err != nil {
			b.Fatal(err)
		}
		host, err := fileConn(h)
		if err != nil {
			b.Fatal(err)
		}
		guest, err := fileConn(g)
		if err != nil {
			b.Fatal(err)
		}
		defer host.Close()
		defer guest.Close()
		go func() { _, _ = io.Copy(guest, guest) }()
		roundTrips(b, host)
	})
	b.Run("vm", func(b *testing.B) {
		needQEMU(b)
		vm, err := Start(context.Background(), testConfig(b))
		if err != nil {
			b.Fatal(err)
		}
		defer closeVM(b, vm)
		askEcho(b, vm)
		roundTrips(b, vm.Stream())
	})
}

func roundTrips(b *testing.B, c io.ReadWriter) {
	var lat []time.Duration
	one := []byte{'x'}
	for b.Loop() {
		t0 := time.Now()
		if _, err := c.Write(one); err != nil {
			b.Fatal(err)
		}
		if _, err := io.ReadFull(c, one); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.ReportMetric(ms(pct(lat, 50))*1000, "p50-us")
}

func pct(d []time.Duration, p int) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pssKiB reads Pss from /proc/<pid>/smaps_rollup.
func pssKiB(b *testing.B, pid int) int {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "Pss:"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatal("no Pss line in smaps_rollup")
	return 0
}
