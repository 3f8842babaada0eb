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
)

// deadPid is above the largest pid_max Linux allows (2^22), so no
// process ever has it.
const deadPid = 1<<22 + 1

// staleList is what the engine lists under Label: containers of this
// Warden, of a dead one, of a live one (init), and a label that names
// no pid.
func staleList() []Container {
	return []Container{
		{ID: "mine", Labels: map[string]string{Label: strconv.Itoa(os.Getpid())}},
		{ID: "dead", Labels: map[string]string{Label: strconv.Itoa(deadPid)}},
		{ID: "dead2", Labels: map[string]string{Label: strconv.Itoa(deadPid + 1)}},
		{ID: "live", Labels: map[string]string{Label: "1"}},
		{ID: "garbled", Labels: map[string]string{Label: "x"}},
		{ID: "unlabelled", Labels: map[string]string{"other": strconv.Itoa(deadPid)}},
	}
}

// TestStaleContainers: only the containers of Wardens that died are
// stale, asked of the engine by Warden's label.
func TestStaleContainers(t *testing.T) {
	f := newMemEngine()
	f.list = staleList()
	got, err := staleContainers(context.Background(), f)
	if want := []string{"dead", "dead2"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("staleContainers = %v, %v, want %v", got, err, want)
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
		{"all removed", "", []string{"Remove dead", "Remove dead2"}, nil},
		{"removals fail", "Remove", []string{"Remove dead", "Remove dead2"}, []string{"dead", "dead2"}},
		{"listing fails", "List", nil, []string{""}},
	}
	for _, tt := range tests {
		f := newMemEngine()
		f.list = staleList()
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
