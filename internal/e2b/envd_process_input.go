package e2b

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/warden-sandbox/warden/internal/e2b/processpb"
)

// SendInput writes bytes to a process's stdin.
func (ps *processService) SendInput(ctx context.Context, req *connect.Request[processpb.SendInputRequest]) (*connect.Response[processpb.SendInputResponse], error) {
	tb, p, err := ps.process(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := writeInput(ctx, tb, p, req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.SendInputResponse{}), nil
}

// StreamInput writes a client stream's data to the stdin of the process
// its first message names. E2B's JS SDK never calls it: its transport
// (fetch) cannot stream a request body, so it sends SendInput instead.
func (ps *processService) StreamInput(ctx context.Context, stream *connect.ClientStream[processpb.StreamInputRequest]) (*connect.Response[processpb.StreamInputResponse], error) {
	_, tb, err := ps.sandboxTable(ctx)
	if err != nil {
		return nil, err
	}
	var p *proc
	for stream.Receive() {
		switch e := stream.Msg().GetEvent().(type) {
		case *processpb.StreamInputRequest_Start:
			if p, err = tb.find(e.Start.GetProcess()); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("data before start: send a start event naming the process first"))
			}
			if err := writeInput(ctx, tb, p, e.Data.GetInput()); err != nil {
				return nil, err
			}
		case *processpb.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("an input event that is none of start, data, keepalive"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, err
	}
	return connect.NewResponse(&processpb.StreamInputResponse{}), nil
}

// CloseStdin closes a process's stdin, so that it reads end of file.
func (ps *processService) CloseStdin(ctx context.Context, req *connect.Request[processpb.CloseStdinRequest]) (*connect.Response[processpb.CloseStdinResponse], error) {
	_, p, err := ps.process(ctx, req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.closeStdin(); err != nil {
		return nil, ps.internal("closing a process's stdin", err)
	}
	return connect.NewResponse(&processpb.CloseStdinResponse{}), nil
}

// writeInput writes in to p's stdin, holding its bytes against the
// sandbox's stdin in flight, until ctx's deadline or stdinWriteLimit.
func writeInput(ctx context.Context, tb *procTable, p *proc, in *processpb.ProcessInput) error {
	var data []byte
	switch i := in.GetInput().(type) {
	case *processpb.ProcessInput_Stdin:
		data = i.Stdin
	case *processpb.ProcessInput_Pty:
		return errNoPTY
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("no input given: set input.stdin"))
	}
	if err := tb.takeStdin(len(data)); err != nil {
		return err
	}
	defer tb.giveStdin(len(data))
	deadline := time.Now().Add(stdinWriteLimit)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("process %d has no stdin: it was closed, or the process was started without stdin (start it with stdin: true)", p.pid))
	}
	if err := p.stdin.SetWriteDeadline(deadline); err != nil {
		return connect.NewError(connect.CodeInternal, fmt.Errorf("setting the stdin deadline: %w", err))
	}
	if _, err := p.stdin.Write(data); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return connect.NewError(connect.CodeDeadlineExceeded, fmt.Errorf("process %d did not read its stdin in time: %d bytes may have been written in part", p.pid, len(data)))
		}
		return connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("writing to process %d's stdin: it stopped reading it or ended", p.pid))
	}
	return nil
}
