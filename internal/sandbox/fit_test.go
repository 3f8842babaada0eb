package sandbox

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/spec"
)

// hardBackend is a fakeBackend with hard bounds, as the native one has.
type hardBackend struct {
	fakeBackend
	hard []HardCeiling
}

func (h *hardBackend) HardCeilings() []HardCeiling { return h.hard }

// TestFitClampsDefaults: ceilings below the built-in defaults lower the
// defaults instead of refusing to start; the Manager's DefaultLimits and
// pool hold the lowered ones, and a request asking for nothing fits.
func TestFitClampsDefaults(t *testing.T) {
	c := spec.Ceilings{Timeout: 30 * time.Second, MemoryBytes: 256 * spec.MiB, CPUs: 0.5, OpenFiles: 512}
	cfg := Config{Ceilings: c, Pool: 1}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("Validate() = %v, want nil", err)
	}
	_, notes, err := cfg.Fit(&fakeBackend{})
	if err != nil {
		t.Fatalf("Fit() = %v, want nil", err)
	}
	if len(notes) != 4 || !strings.Contains(notes[0], "the default timeout limit is lowered from 1m0s to 30s, the ceiling set by --max-timeout") {
		t.Errorf("Fit() notes = %q, want the four lowered defaults, timeout first", notes)
	}
	m, b := newTestManager(t, cfg)
	want := spec.DefaultLimits
	want.Timeout, want.MemoryBytes, want.CPUs, want.OpenFiles = 30*time.Second, 256*spec.MiB, 0.5, 512
	if got := m.DefaultLimits(); got != want {
		t.Errorf("DefaultLimits() = %+v, want %+v", got, want)
	}
	if m.poolSpec.Limits != want {
		t.Errorf("pool limits = %+v, want the default ones %+v", m.poolSpec.Limits, want)
	}
	waitFor(t, "the pool's box", func() bool { return b.alive() == 1 })
	if _, err := m.Create(context.Background(), "alice", SessionOptions{Limits: m.DefaultLimits()}); err != nil {
		t.Errorf("Create() with the default limits = %v", err)
	}
	b.mu.Lock()
	starts := b.starts
	b.mu.Unlock()
	if starts != 1 {
		t.Errorf("%d boxes built, want 1: the session must take the pooled one", starts)
	}
}

// TestFitHardCeilings: a backend's hard bounds become the ceilings and
// lower the defaults; one below what any sandbox needs refuses to start
// with the bound and how to raise it.
func TestFitHardCeilings(t *testing.T) {
	nofile := HardCeiling{Field: "open files", Value: 512, Least: 64, Source: "warden's hard RLIMIT_NOFILE", Raise: "ulimit -Hn, or LimitNOFILE= under systemd"}
	b := &hardBackend{hard: []HardCeiling{nofile}}
	got, notes, err := Config{Ceilings: spec.Ceilings{OpenFiles: 65536}}.Fit(b)
	if err != nil {
		t.Fatalf("Fit() = %v", err)
	}
	if got.Ceilings.OpenFiles != 512 || got.DefaultLimits.OpenFiles != 512 {
		t.Errorf("open files ceiling %d, default %d; want both 512", got.Ceilings.OpenFiles, got.DefaultLimits.OpenFiles)
	}
	if len(notes) != 2 || !strings.Contains(notes[0], "the open files ceiling (--max-open-files) is lowered from 65536 to 512, warden's hard RLIMIT_NOFILE") {
		t.Errorf("notes = %q, want the ceiling then the default lowered", notes)
	}
	if got, _, _ := (Config{}).Fit(b); got.Ceilings.OpenFiles != 512 {
		t.Errorf("no ceiling set: open files ceiling %d, want the hard 512", got.Ceilings.OpenFiles)
	}
	m := NewManager(b, Config{})
	t.Cleanup(func() { m.Close() })
	o := defaultOptions()
	o.Limits.OpenFiles = 513
	_, err = m.Create(context.Background(), "alice", o)
	checkInvalid(t, "open files above the hard bound", err,
		"open files 513 is above this server's ceiling of 512 (set by warden's hard RLIMIT_NOFILE): ask for at most 512")
	nofile.Value = 20
	b.hard = []HardCeiling{nofile}
	_, _, err = Config{}.Fit(b)
	const want = "warden's hard RLIMIT_NOFILE is 20, below the 64 open files a sandbox needs: start warden with a higher hard limit (ulimit -Hn, or LimitNOFILE= under systemd)"
	if err == nil || err.Error() != want {
		t.Errorf("Fit() under 20 open files = %v, want %q", err, want)
	}
}

// TestMemoryBudgetPerOwner: one owner's sandboxes together stay within
// the budget, concurrent creates included; past it is ErrTooMany naming
// the flag, a request alone above it is invalid, and other owners are
// untouched. Deleting gives the budget back.
func TestMemoryBudgetPerOwner(t *testing.T) {
	one := spec.DefaultLimits.MemoryBytes + spec.DefaultLimits.DiskBytes
	m, _ := newTestManager(t, Config{MaxSessions: 64, MaxBytesPerOwner: 3 * one})
	ctx := context.Background()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ids []string
	var refusals []error
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			info, err := m.Create(ctx, "alice", defaultOptions())
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				refusals = append(refusals, err)
				return
			}
			ids = append(ids, info.ID)
		}()
	}
	wg.Wait()
	if len(ids) != 3 {
		t.Fatalf("alice got %d sessions of 768MiB each in a 2.25GiB budget, want 3", len(ids))
	}
	for _, err := range refusals {
		if !errors.Is(err, ErrTooMany) || !strings.Contains(err.Error(), "the key's budget is 2.25GiB (set by --max-memory-per-key)") {
			t.Errorf("refusal %v, want ErrTooMany naming the budget and flag", err)
		}
	}
	if _, err := m.Run(ctx, "alice", defaultOptions(), ExecRequest{Command: []string{"true"}}, Stream{}); !errors.Is(err, ErrTooMany) {
		t.Errorf("alice's Run() past her budget = %v, want ErrTooMany", err)
	}
	if _, err := m.Create(ctx, "bob", defaultOptions()); err != nil {
		t.Errorf("bob's Create() = %v, want a session: alice's budget is hers", err)
	}
	big := defaultOptions()
	big.Limits.MemoryBytes = 4 * one
	_, err := m.Create(ctx, "bob", big)
	checkInvalid(t, "a request above the budget alone", err, "is above 2.25GiB, what one key may hold on this server (set by --max-memory-per-key)")
	if err := m.Delete(ctx, "alice", ids[0]); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); err != nil {
		t.Errorf("Create() after a Delete = %v, want the budget given back", err)
	}
}

// TestDeadSessionsKeepTheirDisk: a dead session whose workspace is kept
// still counts its disk against its owner's budget, recovered ones too,
// until it is deleted.
func TestDeadSessionsKeepTheirDisk(t *testing.T) {
	st, a, _ := crashedStore(t)
	one := spec.DefaultLimits.MemoryBytes + spec.DefaultLimits.DiskBytes
	m, _ := newStoreManager(t, st, Config{MaxBytesPerOwner: one + spec.DefaultLimits.DiskBytes - 1})
	ctx := context.Background()
	if _, err := m.Create(ctx, "alice", defaultOptions()); !errors.Is(err, ErrTooMany) {
		t.Errorf("Create() beside a dead session's kept disk = %v, want ErrTooMany", err)
	}
	if _, err := m.Create(ctx, "bob", defaultOptions()); err != nil {
		t.Errorf("bob's Create() (his dead session's workspace was lost) = %v", err)
	}
	if err := m.Delete(ctx, "alice", a.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Create(ctx, "alice", defaultOptions()); err != nil {
		t.Errorf("Create() once the dead session is deleted = %v", err)
	}
}

// TestRevivedSessionsGetTheCaps: a session a former server made with a
// longer ttl or idle timeout is held to this server's caps.
func TestRevivedSessionsGetTheCaps(t *testing.T) {
	st, a, _ := crashedStore(t)
	a.ExpiresAt, a.IdleTimeout = a.CreatedAt.Add(48*time.Hour), 24*time.Hour
	st.records[a.ID] = a
	m, _ := newStoreManager(t, st, Config{MaxTTL: time.Hour, MaxIdle: time.Minute})
	s, err := m.lookupCtx(context.Background(), "alice", a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if want := a.CreatedAt.Add(time.Hour); !s.expires.Equal(want) || s.idle != time.Minute {
		t.Errorf("revived expires %v, idle %v; want %v and 1m0s", s.expires, s.idle, want)
	}
}

// TestPoolSaysWhyItFails: a pool that cannot build says why, once per
// poolErrorEvery however often it retries.
func TestPoolSaysWhyItFails(t *testing.T) {
	var mu sync.Mutex
	var errs []error
	failing := func(context.Context, spec.Spec) (Box, string, error) { return nil, "", errors.New("no room") }
	p := newPool(failing, func(Box, string) {}, nil, spec.Spec{}, 1, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	})
	count := func() int { mu.Lock(); defer mu.Unlock(); return len(errs) }
	waitFor(t, "the pool's first error", func() bool { return count() > 0 })
	// Let it retry a few times: the second second's retry must not report.
	time.Sleep(2500 * time.Millisecond)
	p.close()
	if n := count(); n != 1 {
		t.Errorf("%d errors reported in under a minute, want 1", n)
	}
	if msg := errs[0].Error(); msg != "building a pooled sandbox (retried after 1m0s at most): no room" {
		t.Errorf("error %q, want it to say what failed and that it is retried", msg)
	}
}

// TestTooManyHidesOtherTenants: the server-wide refusal says nothing of
// other keys' sessions, only the caller's own count.
func TestTooManyHidesOtherTenants(t *testing.T) {
	m, _ := newTestManager(t, Config{MaxSessions: 2, MaxPerOwner: 2})
	fill(t, m, "alice", 2)
	_, err := m.Create(context.Background(), "bob", defaultOptions())
	if !errors.Is(err, ErrTooMany) || strings.Contains(err.Error(), "2") || !strings.Contains(err.Error(), "this key holds 0") {
		t.Errorf("bob's refusal = %v, want ErrTooMany with his own count only", err)
	}
}
