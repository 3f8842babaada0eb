package sandbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// fill creates sessions for owner until the Manager refuses one, and
// returns how many it got; it stops after limit tries.
func fill(t *testing.T, m *Manager, owner string, limit int) int {
	t.Helper()
	for n := range limit {
		if _, err := m.Create(context.Background(), owner, defaultOptions()); err != nil {
			if !errors.Is(err, ErrTooMany) {
				t.Fatalf("%s's session %d: %v, want a session or ErrTooMany", owner, n, err)
			}
			return n
		}
	}
	return limit
}

// TestDefaultShareLeavesEveryOwnerRoom: with the default share, owners
// that take all they can never leave the last one less than its share.
func TestDefaultShareLeavesEveryOwnerRoom(t *testing.T) {
	tests := []struct{ sessions, owners, share int }{
		{64, 1, 64},
		{64, 2, 32},
		{64, 3, 21},
		{10, 4, 2},
		{64, 40, 1},
		{5, 5, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%d sessions %d owners", tt.sessions, tt.owners), func(t *testing.T) {
			m, _ := newTestManager(t, Config{MaxSessions: tt.sessions, Owners: tt.owners})
			if got := m.PerOwner(); got != tt.share {
				t.Errorf("PerOwner() = %d, want %d", got, tt.share)
			}
			for i := range tt.owners - 1 {
				if got := fill(t, m, fmt.Sprint("greedy", i), tt.sessions+1); got != tt.share {
					t.Errorf("greedy owner %d got %d sessions, want its share %d", i, got, tt.share)
				}
			}
			if got := fill(t, m, "last", tt.sessions+1); got != tt.share {
				t.Errorf("the last owner got %d sessions, want its share %d", got, tt.share)
			}
		})
	}
}

func TestShareMessageNamesTheKey(t *testing.T) {
	m, _ := newTestManager(t, Config{MaxSessions: 4, Owners: 2})
	fill(t, m, "alice", 3)
	_, err := m.Run(context.Background(), "alice", defaultOptions(), ExecRequest{Command: []string{"true"}}, Stream{})
	if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "this key holds 2 sessions and runs, its limit is 2") {
		t.Errorf("Run() past the share = %v, want ErrTooMany naming the key's limit", err)
	}
	if _, err := m.Run(context.Background(), "bob", defaultOptions(), ExecRequest{Command: []string{"true"}}, Stream{}); err != nil {
		t.Errorf("bob's Run() = %v, want a run", err)
	}
}

// TestTooManyNamesTheFlag: each 429 for a count says which flag sets
// it: the key's share --max-sessions-per-key, the server's limit
// --max-sessions (warden mcp's too, whose only count it is).
func TestTooManyNamesTheFlag(t *testing.T) {
	m, _ := newTestManager(t, Config{MaxSessions: 2, MaxPerOwner: 1})
	tests := []struct {
		holds            string // who takes a session first
		owner, want, not string
	}{
		{"alice", "alice", "its limit is 1 (set by --max-sessions-per-key", ""},
		{"bob", "carol", "--max-sessions", "--max-sessions-per-key"},
	}
	for _, tt := range tests {
		fill(t, m, tt.holds, 1)
		_, err := m.Create(context.Background(), tt.owner, defaultOptions())
		if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), tt.want) || (tt.not != "" && strings.Contains(err.Error(), tt.not)) {
			t.Errorf("%s's Create: got %v, want ErrTooMany naming %q", tt.owner, err, tt.want)
		}
	}
}

// TestPooledBoxesCountForNobody: boxes built ahead take no owner's slot.
func TestPooledBoxesCountForNobody(t *testing.T) {
	m, b := newTestManager(t, Config{MaxSessions: 2, Owners: 2, Pool: 2})
	waitFor(t, "the pool's 2 boxes", func() bool { return b.alive() == 2 })
	if got := fill(t, m, "alice", 3); got != 1 {
		t.Errorf("alice got %d sessions beside a full pool, want her share 1", got)
	}
}

// flagCaps are the caps the flags default to.
var flagCaps = Config{MaxTTL: DefaultMaxTTL, MaxIdle: DefaultMaxIdle}

func TestSessionLifeCaps(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		o    func(*SessionOptions)
		want string
	}{
		{"a day's ttl under the default cap", flagCaps, func(o *SessionOptions) { o.TTL = 24 * time.Hour }, "ttl 24h0m0s is out of range: use up to 6h0m0s, this server's ceiling (set by --max-ttl)"},
		{"ttl at the cap", flagCaps, func(o *SessionOptions) { o.TTL = DefaultMaxTTL }, ""},
		{"a day's idle under the default cap", flagCaps, func(o *SessionOptions) { o.IdleTimeout = 24 * time.Hour }, "idle timeout 24h0m0s is out of range: use up to 1h0m0s, this server's ceiling (set by --max-idle-timeout)"},
		{"idle at the cap", flagCaps, func(o *SessionOptions) { o.IdleTimeout = DefaultMaxIdle }, ""},
		{"no cap: a day", Config{}, func(o *SessionOptions) { o.TTL, o.IdleTimeout = MaxSessionLife, MaxSessionLife }, ""},
		{"idle over a set cap", Config{MaxIdle: time.Minute}, func(o *SessionOptions) { o.IdleTimeout = 2 * time.Minute }, "use up to 1m0s"},
		{"ttl over a set cap", Config{MaxTTL: time.Minute}, func(o *SessionOptions) { o.TTL = 2 * time.Minute }, "use up to 1m0s"},
	}
	for _, tt := range tests {
		m, _ := newTestManager(t, tt.cfg)
		o := defaultOptions()
		tt.o(&o)
		_, err := m.Create(context.Background(), "alice", o)
		checkInvalid(t, tt.name, err, tt.want)
	}
}

// checkInvalid wants err nil when want is empty, else ErrInvalid with
// want in its message.
func checkInvalid(t *testing.T, name string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: got %v, want no error", name, err)
	case want != "" && (err == nil || !errors.Is(err, spec.ErrInvalid) || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: got %v, want ErrInvalid containing %q", name, err, want)
	}
}

// TestManagerCeilings: every way in (a session, a run, an exec's own
// timeout) meets the same ceilings.
func TestManagerCeilings(t *testing.T) {
	ceilings := spec.Ceilings{Timeout: time.Minute, MemoryBytes: spec.GiB, Pids: 512}
	m, _ := newTestManager(t, Config{Ceilings: ceilings})
	ctx := context.Background()
	big := defaultOptions()
	big.Limits.MemoryBytes = 64 * spec.GiB
	const wantMemory = "memory 64GiB is above this server's ceiling of 1GiB (set by --max-memory): ask for at most 1GiB"
	_, err := m.Create(ctx, "alice", big)
	checkInvalid(t, "Create", err, wantMemory)
	_, err = m.Run(ctx, "alice", big, ExecRequest{Command: []string{"true"}}, Stream{})
	checkInvalid(t, "Run", err, wantMemory)
	_, err = m.Run(ctx, "alice", defaultOptions(), ExecRequest{Command: []string{"true"}, Timeout: time.Hour}, Stream{})
	checkInvalid(t, "Run's timeout", err, "timeout 1h0m0s is above this server's ceiling of 1m0s (set by --max-timeout)")
	info, err := m.Create(ctx, "alice", defaultOptions())
	if err != nil {
		t.Fatalf("Create() with the defaults = %v", err)
	}
	_, err = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true"}, Timeout: time.Hour}, Stream{})
	checkInvalid(t, "Exec's timeout", err, "timeout 1h0m0s is above this server's ceiling of 1m0s (set by --max-timeout)")
	_, err = m.Exec(ctx, "alice", info.ID, ExecRequest{Command: []string{"true"}, Timeout: time.Minute}, Stream{})
	checkInvalid(t, "Exec at the ceiling", err, "")
	m.mu.Lock()
	n := m.active
	m.mu.Unlock()
	if n != 1 {
		t.Errorf("%d slots held after the refusals, want 1", n)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"defaults", Config{Ceilings: DefaultCeilings()}, ""},
		{"ttl over its cap", Config{DefaultTTL: 8 * time.Hour, MaxTTL: DefaultMaxTTL}, "the default ttl 8h0m0s is longer than --max-ttl 6h0m0s"},
		{"idle over its cap", Config{DefaultIdle: 2 * time.Hour, MaxIdle: DefaultMaxIdle}, "longer than --max-idle-timeout 1h0m0s"},
		{"negative share", Config{MaxPerOwner: -1}, "--max-sessions-per-key -1 is negative"},
		{"defaults under a ceiling", Config{Ceilings: spec.Ceilings{MemoryBytes: 256 * spec.MiB, Timeout: 30 * time.Second}}, ""},
		{"negative ceiling", Config{Ceilings: spec.Ceilings{Pids: -5}}, "--max-pids -5 is not a ceiling"},
		{"NaN cpus", Config{Ceilings: spec.Ceilings{CPUs: math.NaN()}}, "--max-cpus NaN is not a ceiling"},
		{"short timeout ceiling", Config{Ceilings: spec.Ceilings{Timeout: time.Millisecond}}, "--max-timeout 1ms is too short"},
		{"no ttl cap", Config{MaxTTL: 0, DefaultTTL: 20 * time.Hour}, ""},
		{"negative ttl cap", Config{MaxTTL: -time.Hour}, "--max-ttl -1h0m0s is out of range: use up to 24h0m0s, the API's own maximum (0 means it)"},
		{"ttl cap over a day", Config{MaxTTL: 48 * time.Hour}, "--max-ttl 48h0m0s is out of range"},
		{"negative idle cap", Config{MaxIdle: -1}, "--max-idle-timeout -1ns is out of range"},
		{"negative budget", Config{MaxBytesPerOwner: -2}, "--max-memory-per-key -2B is negative"},
		{"bad default limits", Config{DefaultLimits: spec.Limits{Pids: -1}}, "pids -1 is out of range"},
	}
	for _, tt := range tests {
		err := tt.cfg.Validate()
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: Validate() = %v, want nil", tt.name, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: Validate() = %v, want an error containing %q", tt.name, err, tt.want)
		}
	}
}

// TestDefaultCeilingsFitTheHost: CPUs no more than warden may use, and
// memory a quarter of what it may use.
func TestDefaultCeilingsFitTheHost(t *testing.T) {
	c := DefaultCeilings()
	if c.CPUs <= 0 || c.CPUs > float64(runtime.NumCPU()) {
		t.Errorf("cpus ceiling %g, want above 0 up to the host's %d cores", c.CPUs, runtime.NumCPU())
	}
	if ram, err := AvailableMemory(); err == nil && c.MemoryBytes > ram/4 {
		t.Errorf("memory ceiling %s is more than a quarter of the %s available", spec.FormatSize(c.MemoryBytes), spec.FormatSize(ram))
	}
}

// waitFor waits until cond holds, polling; the bound is generous, for a
// loaded machine, and only keeps a broken test from hanging.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s after 2 minutes", what)
		}
	}
}
