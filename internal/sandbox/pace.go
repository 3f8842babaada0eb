package sandbox

import (
	"context"
	"fmt"
	"math"
	"time"

	"golang.org/x/time/rate"

	"github.com/warden-sandbox/warden/internal/spec"
)

// Every exec costs the host CPU outside the sandbox's cgroup, where no
// limit charges it: the request, the agent protocol and the result, and
// for a command its own cgroup and pipes. A client sending tiny execs as
// fast as it can would spend several times its session's CPU quota on
// the host. So exec starts are paced per session by that cost: tokens are
// milliseconds of host CPU, each exec takes its cost, and they come at the
// exec pace (the fraction of the quota the host may spend on execs;
// DefaultExecPace is a tenth, so 100 a second per core of quota).
//
// The costs are what an exec costs when execs come one at a time, as
// pacing makes them come at small quotas: each then wakes the server's
// idle threads, and costs more than in a tight loop. Measured with warden
// serve on a loaded two-core host (the server, its spawner and the init's
// threads outside the cgroups): a command 6 to 7.3 ms at 1 to 5 a second
// (3.5 to 4.6 ms at 20 to 50), code in a persistent interpreter 2.2 to
// 3.6 ms (1.1 to 1.3 ms), of which the idle server and session account
// for about 1 ms a second. The charges leave a margin over that, since
// at small quotas the server's own idle cost takes part of the tenth.
// The burst, two seconds of the rate and at least minBurstExecs execs of
// code (the first starting the interpreter) or 80 commands, lets
// interactive use and a benchmark of 200 execs never wait; it is an
// allowance of host CPU, 806 ms at the least, that each session gets once,
// when it is created, from its owner's reservoir (see execBursts), so that
// creating sessions anew does not renew it.
const (
	// DefaultExecPace is the fraction of a session's CPU quota the host
	// may spend on its execs when Config.ExecPace is zero.
	DefaultExecPace = 0.1
	// MaxExecPace bounds Config.ExecPace: ten times the quota.
	MaxExecPace = 10
	// codeExecCost and commandExecCost are what an exec of code in a
	// persistent interpreter and a command exec cost the host, in ms.
	codeExecCost    = 4
	commandExecCost = 10
	// interpStartCost is what an exec of code that starts its interpreter
	// (the first, or the first after user code or a limit ended it)
	// costs on top of codeExecCost: a start spawns a process with its
	// pipes and pumps and waits for a handshake, measured at about 7 ms,
	// so the exec is charged as a command.
	interpStartCost = commandExecCost - codeExecCost
	// execBurstSeconds is the burst in seconds of the rate, at least
	// minBurstExecs execs of code in one interpreter, its start included.
	execBurstSeconds = 2
	minBurstExecs    = 200
	minExecBurst     = minBurstExecs*codeExecCost + interpStartCost
)

// execPacer paces one session's exec starts; nil paces nothing.
type execPacer struct {
	lim *rate.Limiter
	// rate is the tokens (ms of host CPU) a second, for messages.
	rate  float64
	now   func() time.Time
	after func(time.Duration) <-chan time.Time
}

// newExecPacer paces the execs of a session with cpus cores of quota
// (spec.QuotaCPUs) at pace (see Config.ExecPace; negative: not paced).
func newExecPacer(cpus, pace float64) *execPacer {
	if !(pace > 0) || math.IsInf(pace, 0) {
		return nil
	}
	r := pace * 1000 * spec.QuotaCPUs(cpus)
	burst := max(minExecBurst, int(math.Ceil(execBurstSeconds*r)))
	return &execPacer{lim: rate.NewLimiter(rate.Limit(r), burst), rate: r, now: time.Now, after: time.After}
}

// burst is the most tokens p holds: what a new session may be given.
func (p *execPacer) burst() int {
	if p == nil {
		return 0
	}
	return p.lim.Burst()
}

// startWith leaves p only the granted tokens of its burst (those its
// owner's reservoir gave), so a session created when the reservoir is low
// starts with a smaller burst.
func (p *execPacer) startWith(granted int) {
	if p == nil || granted >= p.lim.Burst() {
		return
	}
	p.lim.AllowN(p.now(), p.lim.Burst()-max(granted, 0))
}

// outputBytesPerMS is how many bytes of an exec's output cost the host
// about a millisecond to send back: a Result holding 1 MiB of NUL bytes in
// each stream (12.6 MB of JSON, each NUL written as \u0000) measured
// 41 ms of warden serve's CPU, some 50 KiB of output a ms at the worst
// escaping. Plain text costs less; the charge is for the worst.
const outputBytesPerMS = 48 << 10

// outputCost is what sending r's output (both streams, twice when they
// were streamed, the value, the exception and rich outputs) costs the
// host, in the pacer's tokens: charged after the exec, since only then is
// it known, so a session whose execs print megabytes is paced by that
// rather than by their number alone.
func outputCost(r spec.Result, streamed bool) int {
	n := len(r.Stdout) + len(r.Stderr)
	if streamed { // sent as the stream's events, then again in the Result
		n *= 2
	}
	n += len(r.Value)
	if e := r.Exception; e != nil {
		n += len(e.Type) + len(e.Message) + len(e.Traceback)
	}
	for _, o := range r.Outputs {
		n += len(o.Data)
	}
	return n / outputBytesPerMS // what is below a ms costs nothing
}

// execCost is what req costs the host, in the pacer's tokens.
func execCost(req ExecRequest) int {
	if req.Language != "" {
		return codeExecCost
	}
	return commandExecCost
}

// wait takes cost tokens, waiting for them while ctx allows, and says how
// long it waited. A wait that ctx would end first fails at once, and one
// it ends fails then, with ErrPaced, giving the tokens back. One exec at a
// time waits per session (the others are busy), so a wait is at most
// one exec's cost of time, and an interpreter start's charged after the
// exec before (see charge).
func (p *execPacer) wait(ctx context.Context, cost int) (time.Duration, error) {
	if p == nil {
		return 0, nil
	}
	now := p.now()
	r := p.lim.ReserveN(now, cost)
	if !r.OK() {
		return 0, p.refusal(0, fmt.Errorf("an exec costs %d, more than the burst of %d", cost, p.lim.Burst()))
	}
	d := r.DelayFrom(now)
	if d <= 0 {
		return 0, nil
	}
	if end, ok := ctx.Deadline(); ok && end.Before(now.Add(d)) {
		r.CancelAt(now)
		return 0, p.refusal(d, nil)
	}
	select {
	case <-p.after(d):
		return d, nil
	case <-ctx.Done():
		r.CancelAt(p.now())
		return 0, p.refusal(d, ctx.Err())
	}
}

// charge takes cost tokens for work already done, without waiting: the
// tokens may go below zero, and the next exec waits for them. It is for
// a cost known only once an exec has run (an interpreter it started, its
// output). The bucket refuses, and so would not charge, a take above its
// burst, so a larger cost is taken in pieces of at most the burst.
func (p *execPacer) charge(cost int) {
	if p == nil {
		return
	}
	now := p.now()
	for cost > 0 {
		n := min(cost, p.lim.Burst())
		p.lim.ReserveN(now, n)
		cost -= n
	}
}

// take takes cost tokens for output about to be sent, waiting for them
// until ctx ends, then giving them back and answering ctx's error. Unlike
// wait it never refuses for a deadline: holding the output back, and so
// the process that makes it, is the point. A cost above the burst is taken
// in pieces of at most the burst.
func (p *execPacer) take(ctx context.Context, cost int) error {
	if p == nil {
		return nil
	}
	for cost > 0 {
		n := min(cost, p.lim.Burst())
		now := p.now()
		r := p.lim.ReserveN(now, n)
		if d := r.DelayFrom(now); d > 0 {
			select {
			case <-p.after(d):
			case <-ctx.Done():
				r.CancelAt(p.now())
				return ctx.Err()
			}
		}
		cost -= n
	}
	return nil
}

// refusal says that the exec was not started for exec pacing, and how to
// avoid it.
func (p *execPacer) refusal(d time.Duration, cause error) error {
	err := fmt.Errorf("%w: this session's execs have used the host CPU allowed for them (%g ms a second, after a burst), "+
		"and the next may start in %v; send fewer, larger execs (a script, or more code in one exec), ask for more cpus, "+
		"or have the operator raise --exec-pace", ErrPaced, p.rate, d.Round(time.Millisecond))
	if cause != nil {
		return fmt.Errorf("%w (%w)", err, cause)
	}
	return err
}

// validExecPace checks Config.ExecPace.
func validExecPace(pace float64) error {
	if math.IsNaN(pace) || pace > MaxExecPace {
		return fmt.Errorf("--exec-pace %g is out of range: use 0 (no pacing) up to %g, the fraction of a sandbox's CPU quota the host may spend on its execs", pace, float64(MaxExecPace))
	}
	return nil
}
