package kubeback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	"github.com/warden-sandbox/warden/internal/podclaim"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// TestUnanswered: a Pod that answered no new connection in time is a busy
// session (another replica may hold it); any other failure stays as it is.
func TestUnanswered(t *testing.T) {
	other := errors.New("connection refused")
	for _, c := range []struct {
		name string
		err  error
		busy bool
	}{
		{"handshake deadline", fmt.Errorf("dialing: %w", os.ErrDeadlineExceeded), true},
		{"context deadline", fmt.Errorf("dialing: %w", context.DeadlineExceeded), true},
		{"refused", other, false},
	} {
		got := unanswered(c.err)
		if errors.Is(got, sandbox.ErrBusy) != c.busy || !errors.Is(got, c.err) {
			t.Errorf("%s: got %v, want busy %v wrapping %v", c.name, got, c.busy, c.err)
		}
	}
}

// TestPodDeathCause: a dead session's cause is Find's reason without
// the session and ErrDead Find puts before it, and the whole error when
// Find words it otherwise.
func TestPodDeathCause(t *testing.T) {
	prefix := `session "s1": session is dead: `
	for _, c := range []struct{ err, want string }{
		{prefix + "its Pod default-x was deleted", "its Pod default-x was deleted"},
		{"reading session \"s1\"'s claim: timeout", "reading session \"s1\"'s claim: timeout"},
	} {
		if got := (podDeath{err: errors.New(c.err), prefix: prefix}).Cause(); got != c.want {
			t.Errorf("Cause of %q: got %q, want %q", c.err, got, c.want)
		}
	}
}

// TestAPIRate: a replica's API calls are bounded by explicit QPS and
// burst (the defaults when not given, not client-go's 5 and 10), and
// negative ones are refused in one line naming the flags.
func TestAPIRate(t *testing.T) {
	if got := (Config{}).withDefaults(); got.QPS != DefaultQPS || got.Burst != DefaultBurst {
		t.Errorf("defaults: got QPS %v burst %d, want %v and %d", got.QPS, got.Burst, float32(DefaultQPS), DefaultBurst)
	}
	if got := (Config{QPS: 7, Burst: 9}).withDefaults(); got.QPS != 7 || got.Burst != 9 {
		t.Errorf("given 7 and 9: got QPS %v burst %d", got.QPS, got.Burst)
	}
	key := make([]byte, 32)
	for _, cfg := range []Config{{QPS: -1}, {Burst: -1}} {
		_, err := NewWith("kubernetes", &rest.Config{Host: "http://127.0.0.1:1"}, key, cfg)
		if err == nil || !strings.Contains(err.Error(), "--kube-qps") || strings.Contains(err.Error(), "\n") {
			t.Errorf("QPS %v burst %d: got %v, want one line naming --kube-qps", cfg.QPS, cfg.Burst, err)
		}
	}
}

// TestOwnerCount: a key at its limit of claims across the cluster is
// refused with ErrTooMany in one line naming the flag; under it passes.
func TestOwnerCount(t *testing.T) {
	for _, c := range []struct {
		n, max int
		refuse bool
	}{{0, 1, false}, {2, 3, false}, {3, 3, true}, {5, 3, true}} {
		err := ownerCount(c.n, c.max)
		if c.refuse != (err != nil) || (err != nil && (!errors.Is(err, sandbox.ErrTooMany) || !strings.Contains(err.Error(), "--max-sessions-per-key") || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("%d held, limit %d: got %v, want refused %v with ErrTooMany naming --max-sessions-per-key", c.n, c.max, err, c.refuse)
		}
	}
}

// TestCheckTemplate: a session may name the default template or one of
// --kube-templates; any other is refused as invalid (400) in one line
// naming the flag.
func TestCheckTemplate(t *testing.T) {
	cfg := Config{Templates: []string{"big"}}.withDefaults()
	for _, c := range []struct {
		name string
		ok   bool
	}{{"", true}, {DefaultTemplate, true}, {"big", true}, {"tenant-b-gpu", false}} {
		err := cfg.checkTemplate(c.name)
		if c.ok != (err == nil) || (err != nil && (!errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), "--kube-templates") || strings.Contains(err.Error(), "\n"))) {
			t.Errorf("template %q: got %v, want allowed %v, else ErrInvalid naming --kube-templates", c.name, err, c.ok)
		}
	}
}

// TestOwnerLabel: a claim's owner label is keyed by the router key (a
// reader of claims without it cannot test guesses of an API key), stable
// across replicas sharing the key, distinct per owner, and a valid label
// value.
func TestOwnerLabel(t *testing.T) {
	k1, k2 := []byte(strings.Repeat("a", 32)), []byte(strings.Repeat("b", 32))
	got := OwnerLabel(k1, "0123456789abcdef")
	if again := OwnerLabel(k1, "0123456789abcdef"); again != got {
		t.Errorf("same key and owner: got %q then %q, want the same", got, again)
	}
	if other := OwnerLabel(k2, "0123456789abcdef"); other == got {
		t.Errorf("another router key: got %q, want a label other than %q", other, got)
	}
	if other := OwnerLabel(k1, "fedcba9876543210"); other == got {
		t.Errorf("another owner: got %q, want a label other than %q", other, got)
	}
	if errs := validation.IsValidLabelValue(got); len(errs) != 0 || strings.Contains(got, "0123456789abcdef") {
		t.Errorf("label %q: %v; want a valid label value not holding the owner", got, errs)
	}
}

// TestLowered: the limits a replica's ceilings lowered on a found claim
// are named in the attach's note, with the flag setting each ceiling.
func TestLowered(t *testing.T) {
	ceil := spec.Ceilings(spec.DefaultLimits)
	asked := spec.DefaultLimits
	asked.MemoryBytes *= 4
	_, clamped := ceil.Clamp(asked)
	got := lowered(clamped)
	if !strings.Contains(got, "memory limit") || !strings.Contains(got, "--max-memory") || strings.Contains(got, "\n") {
		t.Errorf("a claim asking 4x the memory ceiling: got note %q, want the memory limit and --max-memory named", got)
	}
	if _, none := ceil.Clamp(spec.DefaultLimits); lowered(none) != "" {
		t.Errorf("limits within the ceilings: got note %q, want none", lowered(none))
	}
}

// TestListed: a listing tells each claim's state without reading its
// Pod (ready once its Pod is recorded, creating before, dead with the
// reason once the ready timeout passed unrecorded) and leaves out a
// claim being deleted.
func TestListed(t *testing.T) {
	c, err := podclaim.New(&rest.Config{Host: "http://127.0.0.1:1"}, podclaim.Config{Namespace: "ns", RouterKey: make([]byte, 32), ActivityInterval: time.Minute, ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	b := &Backend{claims: c}
	now := time.Now()
	held := []*podclaim.Session{
		{ID: "s-ready", Pod: "p", PodUID: "u", Created: now.Add(-time.Hour)},
		{ID: "s-new", Claim: "c-new", Created: now},
		{ID: "s-lost", Claim: "c-lost", Created: now.Add(-2 * time.Minute)},
		{ID: "s-gone", Pod: "p", PodUID: "u", Created: now.Add(-time.Hour), Releasing: true},
	}
	want := []struct {
		id     string
		state  sandbox.State
		reason string
	}{
		{"s-ready", sandbox.StateReady, ""},
		{"s-new", sandbox.StateCreating, ""},
		{"s-lost", sandbox.StateDead, "its claiming replica never recorded a Pod on claim c-lost"},
	}
	got := b.listed("alice", held)
	if len(got) != len(want) {
		t.Fatalf("got %d sessions %+v, want %d", len(got), got, len(want))
	}
	for i, w := range want {
		if g := got[i]; g.ID != w.id || g.Owner != "alice" || g.State != w.state || g.Reason != w.reason {
			t.Errorf("session %d: got %s of %q, %s %q; want %s of alice, %s %q", i, g.ID, g.Owner, g.State, g.Reason, w.id, w.state, w.reason)
		}
	}
}
