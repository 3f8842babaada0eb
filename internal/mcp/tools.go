package mcp

import (
	"fmt"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// tools holds what every tool handler needs; created, when set, records
// the sessions this server's client made, for deletion at disconnect.
type tools struct {
	m       sandbox.Sessions
	opts    Options
	created *tracker
	// limits are the Manager's default limits, read once.
	limits spec.Limits
}

// owner is whom a call acts for: the tenant of the HTTP request's API key
// (see HTTPHandler), or the server's fixed owner.
func (t *tools) owner(req *sdk.CallToolRequest) string {
	if req.Extra != nil && req.Extra.TokenInfo != nil {
		return req.Extra.TokenInfo.UserID
	}
	return t.opts.Owner
}

// register adds every tool to srv with its schema and description. The
// descriptions are written for the model that picks and calls the tools.
func (t *tools) register(srv *sdk.Server) {
	maxTimeout, maxTTL, maxIdle := t.bounds()
	timeouts := func(p map[string]*jsonschema.Schema) { bounds(p["timeout_seconds"], 1, maxTimeout) }
	sandboxed := func(readOnly bool) *sdk.ToolAnnotations {
		return &sdk.ToolAnnotations{ReadOnlyHint: readOnly, OpenWorldHint: ptr(false)}
	}

	sdk.AddTool(srv, &sdk.Tool{
		Name:  "run_code",
		Title: "Run code in a sandbox",
		Description: fmt.Sprintf(`Run Python, Bash or JavaScript (Node.js) code in an isolated Linux sandbox and return its output.
With session_id the code runs in that session's persistent interpreter, like a notebook cell: variables, imports and functions stay for the next run_code call in the same language, and a trailing expression's value is returned (as in Jupyter). Without session_id it runs once in a fresh sandbox that is discarded after; nothing persists.
Python has numpy and matplotlib: every figure left open is returned as a PNG image (no savefig or show needed). An exception comes back with its type, message and traceback.
Each call is limited to %s unless timeout_seconds says otherwise (at most %ds); at the timeout the code is killed, the interpreter restarts empty, and the session's files are kept. There is no network access unless the session was created with an allowlist.
Example: {"language": "python", "code": "import math\nmath.sqrt(2)"}`, t.limits.Timeout, maxTimeout),
		Annotations: sandboxed(false),
		InputSchema: inputSchema[runCodeIn](func(p map[string]*jsonschema.Schema) {
			enum(p["language"], interp.Languages()...)
			p["code"].MinLength = ptr(1)
			timeouts(p)
		}),
	}, t.runCode)

	sdk.AddTool(srv, &sdk.Tool{
		Name:  "run_command",
		Title: "Run a command in a sandbox",
		Description: fmt.Sprintf(`Run a program in an isolated Linux sandbox (Debian userland: python3, node, bash, coreutils, ...) and return its exit status, stdout and stderr.
Give exactly one of argv (the program and its arguments, no shell: ["ls", "-la"]) or shell (a command line run with sh -c, for pipes, redirections and globs: "ls *.csv | wc -l").
With session_id the command runs in that session, in /workspace, and sees the files earlier calls left there; without it, in a fresh sandbox discarded after.
Limited to %s unless timeout_seconds says otherwise (at most %ds); at the timeout only this command is killed. No network unless the session was created with an allowlist.
Example: {"shell": "python3 --version && nproc", "session_id": "ses_..."}`, t.limits.Timeout, maxTimeout),
		Annotations: sandboxed(false),
		InputSchema: inputSchema[runCommandIn](func(p map[string]*jsonschema.Schema) {
			p["argv"].MinItems = ptr(1)
			timeouts(p)
		}),
	}, t.runCommand)

	sdk.AddTool(srv, &sdk.Tool{
		Name:  "create_session",
		Title: "Create a sandbox session",
		Description: `Create a persistent sandbox session and return its session_id. Pass the id to run_code, run_command and the file tools to keep state between calls: interpreter variables, files in /workspace, installed packages.
A session ends when close_session is called, after idle_timeout_seconds without calls, at ttl_seconds, or when this client disconnects (stdio). Close it when the work is done: the number of sessions is limited.
The sandbox has no network by default. network {"mode": "proxy", "allow": ["pypi.org", "*.pythonhosted.org"]} lets it reach only the listed hosts (if the server permits network access).
template picks the software the sandbox starts with: "host" (the default) or a name from list_templates.
Example: {} or {"idle_timeout_seconds": 1800} or {"template": "datasci"}`,
		Annotations: sandboxed(false),
		InputSchema: inputSchema[createSessionIn](func(p map[string]*jsonschema.Schema) {
			bounds(p["ttl_seconds"], 1, maxTTL)
			bounds(p["idle_timeout_seconds"], 1, maxIdle)
			enum(p["network"].Properties["mode"], "none", "proxy")
			p["template"].Pattern = templatePattern
			p["template"].MaxLength = ptr(63)
		}),
	}, t.createSession)

	sdk.AddTool(srv, &sdk.Tool{
		Name:        "close_session",
		Title:       "Close a sandbox session",
		Description: `Close a session: kill everything running in it and delete its sandbox and files. The session_id is invalid afterwards. Call it when the work is done; read_file anything you need first.`,
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
		InputSchema: inputSchema[sessionIn](nil),
	}, t.closeSession)

	sdk.AddTool(srv, &sdk.Tool{
		Name:  "write_file",
		Title: "Write a file into a session",
		Description: fmt.Sprintf(`Write a file into a session's /workspace, creating missing directories and replacing an existing file. Use it to hand data or scripts to code in the sandbox.
Give content for text, or content_base64 for binary data (at most %s per file). path is relative to /workspace or absolute below it.
Example: {"session_id": "ses_...", "path": "data/input.csv", "content": "x,y\n1,2\n"}`, spec.FormatSize(maxWriteBytes)),
		Annotations: &sdk.ToolAnnotations{DestructiveHint: ptr(true), IdempotentHint: true, OpenWorldHint: ptr(false)},
		InputSchema: inputSchema[writeFileIn](func(p map[string]*jsonschema.Schema) {
			p["path"].MinLength = ptr(1)
		}),
	}, t.writeFile)

	sdk.AddTool(srv, &sdk.Tool{
		Name:  "read_file",
		Title: "Read a file from a session",
		Description: fmt.Sprintf(`Read a file from a session's /workspace. Text (UTF-8) comes back as text, PNG, JPEG, GIF and WebP files as images, anything else as base64.
At most %s is returned: a longer text file is cut with a note; for large files use run_command with head, tail or grep instead.
Example: {"session_id": "ses_...", "path": "results/summary.txt"}`, spec.FormatSize(maxReadBytes)),
		Annotations: sandboxed(true),
		InputSchema: inputSchema[readFileIn](func(p map[string]*jsonschema.Schema) {
			p["path"].MinLength = ptr(1)
		}),
	}, t.readFile)

	sdk.AddTool(srv, &sdk.Tool{
		Name:  "list_files",
		Title: "List files in a session",
		Description: `List a directory of a session's /workspace: name, type (file, dir, symlink, other) and size of each entry. path defaults to /workspace itself.
Example: {"session_id": "ses_...", "path": "results"}`,
		Annotations: sandboxed(true),
		InputSchema: inputSchema[listFilesIn](nil),
	}, t.listFiles)

	sdk.AddTool(srv, &sdk.Tool{
		Name:        "list_templates",
		Title:       "List sandbox templates",
		Description: listTemplatesDescription,
		Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true, OpenWorldHint: ptr(false)},
		InputSchema: inputSchema[listTemplatesIn](func(p map[string]*jsonschema.Schema) {
			enum(p["language"], interp.Languages()...)
		}),
	}, t.listTemplates)
}

// bounds are the most seconds a call's timeout and a session's ttl and
// idle timeout may ask for: the Manager's ceiling and caps, or the
// spec's own bound where the operator set no ceiling.
func (t *tools) bounds() (timeout, ttl, idle int64) {
	maxTimeout := t.m.Ceilings().Timeout
	if maxTimeout <= 0 {
		maxTimeout = spec.MaxTimeout
	}
	maxTTL, maxIdle := t.m.LifeCaps()
	return int64(maxTimeout.Seconds()), int64(maxTTL.Seconds()), int64(maxIdle.Seconds())
}
