package metrics

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"strconv"
	"sync"
)

// ProcessMetrics returns gauges of the figures client_golang's Go and
// process collectors gave that dashboards use, computed at scrape time
// with cheap calls: go_goroutines, go_memstats_heap_alloc_bytes,
// go_gc_heap_live_bytes and process_start_time_seconds. The start time is read from /proc once, at
// the first scrape; where /proc cannot tell it, it is left out.
func ProcessMetrics() []Collector {
	var once sync.Once
	var start []Sample
	return []Collector{
		NewGaugeFunc("go_goroutines", "Number of goroutines that currently exist.", nil,
			func() []Sample { return []Sample{{Value: float64(runtime.NumGoroutine())}} }),
		NewGaugeFunc("go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and still in use.", nil,
			func() []Sample {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				return []Sample{{Value: float64(ms.HeapAlloc)}}
			}),
		NewGaugeFunc("go_gc_heap_live_bytes", "Heap bytes the last garbage collection found reachable: what the process really holds, unlike RSS, which lags while freed memory is returned to the kernel.", nil,
			func() []Sample {
				s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
				rtmetrics.Read(s)
				if s[0].Value.Kind() != rtmetrics.KindUint64 {
					return nil
				}
				return []Sample{{Value: float64(s[0].Value.Uint64())}}
			}),
		NewGaugeFunc("process_start_time_seconds", "Start time of the process since unix epoch in seconds.", nil,
			func() []Sample {
				once.Do(func() {
					if t, err := processStart(); err == nil {
						start = []Sample{{Value: t}}
					}
				})
				return start
			}),
	}
}

// userHZ is the unit of /proc's start times: the kernel reports them in
// USER_HZ ticks, fixed at 100 for user space on every Linux architecture.
const userHZ = 100

// processStart is the process's start time in Unix seconds: its start in
// ticks after boot, from /proc/self/stat, plus the boot time from
// /proc/stat.
func processStart() (float64, error) {
	stat, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, fmt.Errorf("reading start time: %w", err)
	}
	// The command name may hold spaces and parentheses; the fields after
	// its closing parenthesis start with the state, field 3 of proc(5),
	// so starttime, field 22, is the 20th.
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	if len(fields) < 20 {
		return 0, errors.New("reading start time: short /proc/self/stat")
	}
	ticks, err := strconv.ParseUint(string(fields[19]), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("reading start time: %w", err)
	}
	boot, err := bootTime()
	if err != nil {
		return 0, err
	}
	return float64(boot) + float64(ticks)/userHZ, nil
}

// bootTime is the btime line of /proc/stat: when the system booted, in
// Unix seconds.
func bootTime() (uint64, error) {
	stat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, fmt.Errorf("reading boot time: %w", err)
	}
	for line := range bytes.Lines(stat) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("reading boot time: %w", err)
			}
			return n, nil
		}
	}
	return 0, errors.New("reading boot time: no btime in /proc/stat")
}
