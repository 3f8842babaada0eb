package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

type runCodeIn struct {
	Language       string `json:"language" jsonschema:"the interpreter: python (Python 3 with numpy and matplotlib), bash, or javascript (Node.js)"`
	Code           string `json:"code" jsonschema:"the code to run; in a session, a trailing expression's value is returned like a notebook cell's"`
	SessionID      string `json:"session_id,omitempty" jsonschema:"a session from create_session, to keep variables and files across calls; omit for a one-off run in a fresh sandbox"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit for this call in seconds; omit for the server's default"`
}

type runCommandIn struct {
	Argv           []string `json:"argv,omitempty" jsonschema:"the program and its arguments, run without a shell, e.g. [\"python3\", \"script.py\"]; give this or shell"`
	Shell          string   `json:"shell,omitempty" jsonschema:"a command line run with sh -c, for pipes, redirections and globs, e.g. \"ls -la | head\"; give this or argv"`
	SessionID      string   `json:"session_id,omitempty" jsonschema:"a session from create_session, to see and keep its files; omit for a one-off run in a fresh sandbox"`
	Stdin          string   `json:"stdin,omitempty" jsonschema:"text given to the command's standard input"`
	Cwd            string   `json:"cwd,omitempty" jsonschema:"working directory inside the sandbox, relative to /workspace or absolute (default /workspace)"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"wall-clock limit for this call in seconds; omit for the server's default"`
}

// runCode runs code in a session's interpreter, or in a session made for
// this one call: unlike a one-shot run, that returns the trailing value
// and the charts, which is what a model asking for a plot wants.
func (t *tools) runCode(ctx context.Context, req *sdk.CallToolRequest, in runCodeIn) (*sdk.CallToolResult, runOut, error) {
	ex := sandbox.ExecRequest{Language: in.Language, Code: in.Code, Timeout: seconds(in.TimeoutSeconds)}
	if in.SessionID != "" {
		return t.execIn(ctx, "run_code", t.owner(req), in.SessionID, ex)
	}
	owner := t.owner(req)
	info, err := t.m.Create(ctx, owner, t.sessionOptions())
	if err != nil {
		return nil, runOut{}, wardenError("run_code: creating a sandbox", err)
	}
	defer func() {
		// The sandbox goes even if the client gave up on the call.
		if err := t.m.Delete(context.WithoutCancel(ctx), owner, info.ID); err != nil {
			t.opts.Logger.Warn("deleting a one-off sandbox", "session", info.ID, "error", err)
		}
	}()
	res, err := t.m.Exec(ctx, owner, info.ID, ex, sandbox.Stream{})
	if err != nil {
		return nil, runOut{}, wardenError("run_code", err)
	}
	return render(res, outcome{timeout: t.timeout(ex.Timeout, info), language: in.Language}), toRunOut(res, ""), nil
}

// runCommand runs argv, or a shell line, in a session or once.
func (t *tools) runCommand(ctx context.Context, req *sdk.CallToolRequest, in runCommandIn) (*sdk.CallToolResult, runOut, error) {
	argv := in.Argv
	switch {
	case len(argv) > 0 && in.Shell != "":
		return nil, runOut{}, errors.New(`run_command: give either argv or shell, not both`)
	case in.Shell != "":
		argv = []string{"sh", "-c", in.Shell}
	case len(argv) == 0:
		return nil, runOut{}, errors.New(`run_command: give argv (e.g. ["ls", "-la"]) or shell (e.g. "ls -la | head")`)
	case argv[0] == "":
		return nil, runOut{}, errors.New("run_command: argv[0], the program name, is empty")
	}
	ex := sandbox.ExecRequest{Command: argv, Cwd: in.Cwd, Timeout: seconds(in.TimeoutSeconds)}
	if in.Stdin != "" {
		ex.Stdin = []byte(in.Stdin)
	}
	if in.SessionID != "" {
		return t.execIn(ctx, "run_command", t.owner(req), in.SessionID, ex)
	}
	if in.Cwd != "" {
		return nil, runOut{}, errors.New("run_command: cwd needs a session_id; a one-off run starts in /workspace")
	}
	o := t.sessionOptions()
	res, err := t.m.Run(ctx, t.owner(req), o, ex, sandbox.Stream{})
	if err != nil {
		return nil, runOut{}, wardenError("run_command", err)
	}
	timeout := o.Limits.Timeout
	if ex.Timeout > 0 {
		timeout = ex.Timeout
	}
	return render(res, outcome{timeout: timeout}), toRunOut(res, ""), nil
}

// execIn runs one step in an existing session.
func (t *tools) execIn(ctx context.Context, tool, owner, id string, ex sandbox.ExecRequest) (*sdk.CallToolResult, runOut, error) {
	res, err := t.m.Exec(ctx, owner, id, ex, sandbox.Stream{})
	if err != nil {
		return nil, runOut{}, wardenError(tool, err)
	}
	var timeout time.Duration
	if res.TimedOut {
		info, _ := t.m.Get(ctx, owner, id)
		timeout = t.timeout(ex.Timeout, info)
	}
	return render(res, outcome{timeout: timeout, language: ex.Language, session: id}), toRunOut(res, id), nil
}

// timeout is the limit an exec ran under: its own, or its session's.
func (t *tools) timeout(asked time.Duration, info sandbox.Info) time.Duration {
	switch {
	case asked > 0:
		return asked
	case info.Limits.Timeout > 0:
		return info.Limits.Timeout
	}
	return t.limits.Timeout
}

// sessionOptions are what every sandbox the tools build starts from.
func (t *tools) sessionOptions() sandbox.SessionOptions {
	return sandbox.SessionOptions{Limits: t.limits, Network: spec.NetworkPolicy{Mode: spec.NetNone}}
}

func seconds(n int) time.Duration { return time.Duration(n) * time.Second }

// publicError is an error whose full line is for the operator (a host
// path, a server flag) and whose Public line is for a client, as
// internal/server answers it: native.ExecutorRefusedError.
type publicError interface {
	error
	Public() string
}

// wardenError says what failed and, for the errors a model can act on,
// what to do next. The SDK turns it into a result with isError set. An
// error with a Public line gives the client only that line: the MCP
// client is a tenant of warden serve's /mcp, and `warden doctor` tells
// the operator the rest.
func wardenError(what string, err error) error {
	var pub publicError
	if errors.As(err, &pub) {
		return fmt.Errorf("%s: %s", what, pub.Public())
	}
	hint := ""
	var paced *sandbox.StartPacedError
	var dead *sandbox.DeadError
	switch {
	case errors.As(err, &paced):
		hint = "; keep using the sessions you have rather than starting new ones"
	case errors.Is(err, sandbox.ErrNotFound), errors.Is(err, sandbox.ErrClosed):
		hint = "; sessions end on close_session, after their idle timeout or lifetime, or when the client disconnects: call create_session for a new one"
	case errors.As(err, &dead) && dead.FilesKept:
		hint = "; its files can still be read with read_file and list_files; call create_session for a new sandbox, and close_session this one when done"
	case errors.Is(err, sandbox.ErrDead):
		hint = "; nothing of it can be used again, its files included: call create_session for a new sandbox, and close_session this one"
	case errors.Is(err, sandbox.ErrBusy):
		hint = "; a session runs one call at a time: wait for the other call to finish, or use another session"
	case errors.Is(err, sandbox.ErrNoChannel):
		hint = "; each language's interpreter this session has used holds channels until the session ends: run this in a language the session already uses, or close_session it and create_session a new one"
	case errors.Is(err, sandbox.ErrTooMany):
		hint = "; close_session sessions you no longer need"
	}
	return fmt.Errorf("%s: %w%s", what, err, hint)
}
