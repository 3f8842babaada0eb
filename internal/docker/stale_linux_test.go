package docker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/boxname"
)

// deadPid is above the largest pid_max Linux allows (2^22), so no
// process ever has it.
const deadPid = 1<<22 + 1

// staleList is what the engine lists under Label: containers of this
// Warden, of a dead one, of one from an earlier boot, of a live one whose
// pid was reused (this process's pid, started earlier), of live init, of
// Wardens in another pid namespace (one whose pid is gone here, one with
// this process's pid), labels that name no owner (a bare pid, as older
// Wardens wrote, pid 0 and -1) and an unlabelled one.
func staleList(t *testing.T) []Container {
	me, err := boxname.Self()
	if err != nil {
		t.Fatalf("boxname.Self: %v", err)
	}
	with := func(f func(o *boxname.Owner)) string {
		o := me
		f(&o)
		return o.String()
	}
	l := func(id, v string) Container { return Container{ID: id, Labels: map[string]string{Label: v}} }
	return []Container{
		l("mine", me.String()),
		l("dead", with(func(o *boxname.Owner) { o.PID = deadPid })),
		l("dead2", with(func(o *boxname.Owner) { o.Boot = "earlier-boot" })),
		l("reused", with(func(o *boxname.Owner) { o.Start-- })),
		l("live", with(func(o *boxname.Owner) { o.PID, o.Start = 1, initStart(t) })),
		l("foreign-gone", with(func(o *boxname.Owner) { o.PidNS++; o.PID = deadPid })),
		l("foreign-samepid", with(func(o *boxname.Owner) { o.PidNS++ })),
		l("bare-pid", strconv.Itoa(deadPid)),
		l("pid0", with(func(o *boxname.Owner) { o.PID = 0 })),
		l("pid-1", with(func(o *boxname.Owner) { o.PID = -1 })),
		l("garbled", "x"),
		{ID: "unlabelled", Labels: map[string]string{"other": strconv.Itoa(deadPid)}},
	}
}

// initStart is pid 1's start time, so a label can name it live.
func initStart(t *testing.T) uint64 {
	b, err := os.ReadFile("/proc/1/stat")
	if err != nil {
		t.Fatalf("reading pid 1's stat: %v", err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	v, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		t.Fatalf("pid 1's start time %q: %v", f[19], err)
	}
	return v
}

// TestStaleContainers: only the containers of Wardens that died (pid gone
// or reused, or an earlier boot) are stale, asked of the engine by
// Warden's label; those of another pid namespace, whatever their pid, and
// unreadable labels are foreign, never stale.
func TestStaleContainers(t *testing.T) {
	f := newMemEngine()
	f.list = staleList(t)
	stale, foreign, err := staleContainers(context.Background(), f)
	if want := []string{"dead", "dead2", "reused"}; err != nil || !slices.Equal(stale, want) {
		t.Errorf("staleContainers = %v, %v, want stale %v", stale, err, want)
	}
	if want := []string{"foreign-gone", "foreign-samepid", "bare-pid", "pid0", "pid-1", "garbled", "unlabelled"}; !slices.Equal(foreign, want) {
		t.Errorf("staleContainers = foreign %v, want %v", foreign, want)
	}
	if f.listLabel != Label {
		t.Errorf("List asked for label %q, want %q", f.listLabel, Label)
	}
}

// TestRemoveStaleContainers: the sweep removes only stale containers,
// goes on past a failed removal and logs each failure as a warning of
// its own naming the container, and a failed listing removes nothing and
// is logged once.
func TestRemoveStaleContainers(t *testing.T) {
	tests := []struct {
		name, fail  string
		wantRemoved []string // attempted removals
		wantWarned  []string // each warning's box ("" for none)
	}{
		{"all removed", "", []string{"Remove dead", "Remove dead2", "Remove reused"}, nil},
		{"removals fail", "Remove", []string{"Remove dead", "Remove dead2", "Remove reused"}, []string{"dead", "dead2", "reused"}},
		{"listing fails", "List", nil, []string{""}},
	}
	for _, tt := range tests {
		f := newMemEngine()
		f.list = staleList(t)
		if tt.fail != "" {
			f.setFail(tt.fail, errors.New(tt.fail+" failed"))
		}
		var buf bytes.Buffer
		removeStaleContainers(context.Background(), f, slog.New(slog.NewJSONHandler(&buf, nil)))
		var removed []string
		for _, c := range f.calls {
			if strings.HasPrefix(c, "Remove ") {
				removed = append(removed, c)
			}
		}
		if !slices.Equal(removed, tt.wantRemoved) {
			t.Errorf("%s: removals %v, want %v", tt.name, removed, tt.wantRemoved)
		}
		var warned []string
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			if line == "" {
				continue
			}
			var r struct{ Level, Box, Err string }
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: log line %q: %v", tt.name, line, err)
			}
			if r.Level != "WARN" || r.Err != tt.fail+" failed" {
				t.Errorf("%s: logged %s, want a warning with err %q", tt.name, line, tt.fail+" failed")
			}
			warned = append(warned, r.Box)
		}
		if !slices.Equal(warned, tt.wantWarned) {
			t.Errorf("%s: warnings for boxes %q, want %q", tt.name, warned, tt.wantWarned)
		}
	}
}
