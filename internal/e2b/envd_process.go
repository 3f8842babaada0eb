package e2b

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/e2b/processpb"
	"github.com/warden-sandbox/warden/internal/e2b/processpb/processpbconnect"
	"github.com/warden-sandbox/warden/internal/sandbox"
)

// Bounds on one call of the process service.
const (
	// procMaxMessageBytes bounds one Connect message from a client: a
	// command, or a piece of stdin (up to about 1.5 MiB, as base64).
	procMaxMessageBytes = 2 << 20
	// stdinWriteLimit bounds one write to a process's stdin when the call
	// has no earlier deadline: a process that never reads its stdin must
	// not hold the call forever.
	stdinWriteLimit = 30 * time.Second
)

// processService is envd's process.Process over Sessions.Spawn: E2B's
// commands and their output streams, stdin and signals.
type processService struct {
	sessions sandbox.Sessions
	log      *slog.Logger
	tables   procTables
	// afterFunc is time.AfterFunc, or a test's clock (nil: time.AfterFunc).
	afterFunc func(time.Duration, func())
}

// later calls f after d, by ps's clock.
func (ps *processService) later(d time.Duration, f func()) {
	if ps.afterFunc != nil {
		ps.afterFunc(d, f)
		return
	}
	time.AfterFunc(d, f)
}

// processRoutes serves the process.Process Connect service on mux. A
// procedure the service does not have gets a Connect error that says so.
func (s *Server) processRoutes(mux *http.ServeMux) {
	svc := &processService{sessions: s.cfg.Sessions, log: s.log, tables: procTables{tables: map[string]*procTable{}}}
	path, h := processpbconnect.NewProcessHandler(svc, connect.WithReadMaxBytes(procMaxMessageBytes), noCompression)
	mux.Handle(path, s.chargedBodies(procMaxMessageBytes, knownProcedures("process.Process", processProcedures, h)))
}

// processProcedures are the process service's procedures.
var processProcedures = []string{
	processpbconnect.ProcessListProcedure, processpbconnect.ProcessConnectProcedure,
	processpbconnect.ProcessStartProcedure, processpbconnect.ProcessUpdateProcedure,
	processpbconnect.ProcessStreamInputProcedure, processpbconnect.ProcessSendInputProcedure,
	processpbconnect.ProcessSendSignalProcedure, processpbconnect.ProcessCloseStdinProcedure,
}

// routed is the sandbox the router checked the call for.
func (ps *processService) routed(ctx context.Context) (*Sandbox, error) {
	sb := sandboxFrom(ctx)
	if sb == nil {
		ps.log.Error("e2b: a process call reached the service without a routed sandbox")
		return nil, connect.NewError(connect.CodeInternal, errors.New("internal error: see the server's log"))
	}
	return sb, nil
}

// sandboxTable is the routed sandbox's process table (an empty one, not
// kept, when it has none), for the calls that start nothing.
func (ps *processService) sandboxTable(ctx context.Context) (*Sandbox, *procTable, error) {
	sb, err := ps.routed(ctx)
	if err != nil {
		return nil, nil, err
	}
	return sb, ps.tables.lookup(sb.ID), nil
}

// process is the routed sandbox's table and its process sel names, for
// the calls that act on one process.
func (ps *processService) process(ctx context.Context, sel *processpb.ProcessSelector) (*procTable, *proc, error) {
	_, tb, err := ps.sandboxTable(ctx)
	if err != nil {
		return nil, nil, err
	}
	p, err := tb.find(sel)
	if err != nil {
		return nil, nil, err
	}
	return tb, p, nil
}

// Start starts a process and streams its events: the start event with its
// pid first, then its output, keepalives while it is quiet, and its end.
// Connect-Timeout-Ms bounds the process too, as under envd: at the
// deadline it is killed. A stream that ends otherwise leaves it running.
func (ps *processService) Start(ctx context.Context, req *connect.Request[processpb.StartRequest], stream *connect.ServerStream[processpb.StartResponse]) error {
	sb, err := ps.routed(ctx)
	if err != nil {
		return err
	}
	limit, err := processTimeout(req.Header())
	if err != nil {
		return err
	}
	p, c, err := ps.start(ctx, sb, req.Msg)
	if err != nil {
		return err
	}
	if limit > 0 {
		killAfter(p, limit, ps.log)
	}
	send := func(e *processpb.ProcessEvent) error { return stream.Send(&processpb.StartResponse{Event: e}) }
	return ps.follow(ctx, p, c, keepaliveEvery(req.Header()), send)
}

// Connect attaches to a running process by pid or tag and streams what it
// has not sent to any stream yet (kept while no stream was attached, up to
// keptOutput), then its further output and its end. A process that ended
// in the last keepEndedProcs gives its start and end events.
func (ps *processService) Connect(ctx context.Context, req *connect.Request[processpb.ConnectRequest], stream *connect.ServerStream[processpb.ConnectResponse]) error {
	_, tb, err := ps.sandboxTable(ctx)
	if err != nil {
		return err
	}
	p, err := tb.findAny(req.Msg.GetProcess())
	if err != nil {
		return err
	}
	c, ok := p.out.attach(maxProcStreams)
	if !ok {
		return connect.NewError(connect.CodeResourceExhausted, fmt.Errorf("process %d has %d streams attached already, the most it may: close one", p.pid, maxProcStreams))
	}
	send := func(e *processpb.ProcessEvent) error { return stream.Send(&processpb.ConnectResponse{Event: e}) }
	return ps.follow(ctx, p, c, keepaliveEvery(req.Header()), send)
}

// follow sends p's start event, then what c reads, keepalives when
// nothing comes for every, and the end; it detaches c when done. Each
// piece of output is paid for on the session's pacer before it is sent:
// while the stream waits it reads nothing, the log fills, the process's
// pipe fills and the process blocks, as under envd when a client reads
// slowly.
func (ps *processService) follow(ctx context.Context, p *proc, c *outCursor, every time.Duration, send func(*processpb.ProcessEvent) error) error {
	defer p.out.detach(c)
	start := &processpb.ProcessEvent_Start{Start: &processpb.ProcessEvent_StartEvent{Pid: p.pid}}
	if err := send(&processpb.ProcessEvent{Event: start}); err != nil {
		return err
	}
	tick := time.NewTimer(every)
	defer tick.Stop()
	for {
		ch, what := p.out.next(ctx, c, tick.C)
		switch what {
		case nextDone:
			return ctx.Err()
		case nextKeepalive:
			tick.Reset(every)
			ka := &processpb.ProcessEvent_Keepalive{Keepalive: &processpb.ProcessEvent_KeepAlive{}}
			if err := send(&processpb.ProcessEvent{Event: ka}); err != nil {
				return err
			}
		case nextEnd:
			<-p.ended // set right after the output closes
			return send(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: p.end}})
		case nextData:
			if err := p.pay(ctx, len(ch.data)); err != nil {
				return err
			}
			if err := send(procDataEvent(ch)); err != nil {
				return err
			}
			tick.Reset(every)
		}
	}
}

// procDataEvent is ch as envd's data event.
func procDataEvent(ch outChunk) *processpb.ProcessEvent {
	d := &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Stdout{Stdout: ch.data}}
	if ch.stderr {
		d.Output = &processpb.ProcessEvent_DataEvent_Stderr{Stderr: ch.data}
	}
	return &processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: d}}
}

// processTimeout is the Connect-Timeout-Ms of a Start, which bounds the
// process (0: none).
func processTimeout(h http.Header) (time.Duration, error) {
	v := h.Get("Connect-Timeout-Ms")
	if v == "" {
		return 0, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms < 0 || ms > 1e10 {
		return 0, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("Connect-Timeout-Ms %.20q is not a number of milliseconds from 0 to 10000000000", v))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// killAfter kills p at limit unless it ended first.
func killAfter(p *proc, limit time.Duration, log *slog.Logger) {
	t := time.AfterFunc(limit, func() {
		if err := p.p.Kill(); err != nil {
			log.Warn("e2b: killing a process at its Connect-Timeout-Ms", "pid", p.pid, "err", err)
		}
	})
	go func() {
		<-p.exited
		t.Stop()
	}()
}

// maxListConfigBytes bounds the configs one List answer carries (counted
// as procConfigSize counts them), so that concurrent Lists of a sandbox
// full of maximal commands cannot make the server hold gigabytes.
const maxListConfigBytes = 1 << 20

// List lists the sandbox's running processes with their config and tag,
// oldest first. Past maxListConfigBytes of configs and tags, a process is
// listed by its pid alone (an empty config, no tag): Connect by that pid
// still reaches it.
func (ps *processService) List(ctx context.Context, _ *connect.Request[processpb.ListRequest]) (*connect.Response[processpb.ListResponse], error) {
	_, tb, err := ps.sandboxTable(ctx)
	if err != nil {
		return nil, err
	}
	tb.mu.Lock()
	live := tb.liveList()
	tb.mu.Unlock()
	out := &processpb.ListResponse{Processes: make([]*processpb.ProcessInfo, 0, len(live))}
	left := maxListConfigBytes
	for _, p := range live {
		info := &processpb.ProcessInfo{Config: &processpb.ProcessConfig{}, Pid: p.pid}
		if p.configSize <= left {
			left -= p.configSize
			info.Config, info.Tag = p.config, p.tag
		}
		out.Processes = append(out.Processes, info)
	}
	return connect.NewResponse(out), nil
}

// SendSignal sends SIGKILL or SIGTERM to a process: SIGKILL to its whole
// group and what it left there; SIGTERM to its group, which may catch it,
// where the box can send it (Warden's agent can), else as SIGKILL.
func (ps *processService) SendSignal(ctx context.Context, req *connect.Request[processpb.SendSignalRequest]) (*connect.Response[processpb.SendSignalResponse], error) {
	_, p, err := ps.process(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	send := p.p.Kill
	switch sig := req.Msg.GetSignal(); sig {
	case processpb.Signal_SIGNAL_SIGKILL:
	case processpb.Signal_SIGNAL_SIGTERM:
		if t, ok := p.p.(interface{ Terminate() error }); ok {
			send = t.Terminate
		}
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("signal %d is not supported: send SIGNAL_SIGKILL (9) or SIGNAL_SIGTERM (15)", int32(sig)))
	}
	if err := send(); err != nil {
		return nil, ps.internal("signalling a process", err)
	}
	return connect.NewResponse(&processpb.SendSignalResponse{}), nil
}

// Update resizes a process's pty; there are no ptys yet.
func (ps *processService) Update(ctx context.Context, req *connect.Request[processpb.UpdateRequest]) (*connect.Response[processpb.UpdateResponse], error) {
	if _, _, err := ps.process(ctx, req.Msg.GetProcess()); err != nil {
		return nil, err
	}
	return nil, errNoPTY
}

// errNoPTY answers every pty request.
var errNoPTY = connect.NewError(connect.CodeUnimplemented, errors.New("ptys are not supported yet: run the command without a pty (commands.run)"))

// internal logs err and answers it as an internal error without detail,
// which may name host paths.
func (ps *processService) internal(what string, err error) error {
	ps.log.Error("e2b: "+what, "err", err)
	return connect.NewError(connect.CodeInternal, fmt.Errorf("internal error %s: see the server's log", what))
}
