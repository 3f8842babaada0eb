package server

import (
	"math"
	"sort"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/spec"
)

// The JSON shapes of api/openapi.yaml. Request fields are pointers where
// "absent" must differ from zero, so an omitted limit takes the default
// and never a silent 0. The tests check every answer against the spec.

// limitsJSON is the spec's Limits. In answers a zero limit ("none") is
// omitted, since the spec's minimums leave 0 no meaning.
type limitsJSON struct {
	MemoryBytes    *int64   `json:"memory_bytes,omitempty"`
	Pids           *int64   `json:"pids,omitempty"`
	CPUs           *float64 `json:"cpus,omitempty"`
	DiskBytes      *int64   `json:"disk_bytes,omitempty"`
	OutputBytes    *int64   `json:"output_bytes,omitempty"`
	CPUTimeSeconds *float64 `json:"cpu_time_seconds,omitempty"`
	FileSizeBytes  *int64   `json:"file_size_bytes,omitempty"`
	OpenFiles      *int64   `json:"open_files,omitempty"`
	TimeoutSeconds *float64 `json:"timeout_seconds,omitempty"`
}

type networkJSON struct {
	Mode  string   `json:"mode,omitempty"`
	Allow []string `json:"allow,omitempty"`
	Deny  []string `json:"deny,omitempty"`
}

// networkRulesJSON is a live session's new rules.
type networkRulesJSON struct {
	Allow []string `json:"allow"`
	Deny  []string `json:"deny"`
}

// networkLogJSON is a session's policy and its egress decisions.
type networkLogJSON struct {
	Network networkJSON         `json:"network"`
	Events  []spec.NetworkEvent `json:"events"`
}

type sessionCreateJSON struct {
	Limits             *limitsJSON       `json:"limits"`
	Network            *networkJSON      `json:"network"`
	Env                map[string]string `json:"env"`
	TTLSeconds         *float64          `json:"ttl_seconds"`
	IdleTimeoutSeconds *float64          `json:"idle_timeout_seconds"`
	Template           string            `json:"template"`
	AutoPause          bool              `json:"auto_pause"`
	AutoSnapshot       bool              `json:"auto_snapshot"`
}

type sessionJSON struct {
	ID                 string        `json:"id"`
	State              string        `json:"state"`
	CreatedAt          time.Time     `json:"created_at"`
	LastUsedAt         time.Time     `json:"last_used_at"`
	ExpiresAt          time.Time     `json:"expires_at"`
	IdleTimeoutSeconds float64       `json:"idle_timeout_seconds"`
	Limits             limitsJSON    `json:"limits"`
	Network            networkJSON   `json:"network"`
	Execs              int64         `json:"execs"`
	Reason             string        `json:"reason,omitempty"`
	Template           string        `json:"template,omitempty"`
	AutoPause          bool          `json:"auto_pause,omitempty"`
	AutoSnapshot       bool          `json:"auto_snapshot,omitempty"`
	PausedAt           *time.Time    `json:"paused_at,omitempty"`
	Snapshot           *snapshotJSON `json:"snapshot,omitempty"`
}

// snapshotJSON is the API's SnapshotInfo.
type snapshotJSON struct {
	At      time.Time `json:"snapshotted_at"`
	Memory  bool      `json:"memory"`
	Bytes   int64     `json:"bytes"`
	Files   int       `json:"files"`
	Skipped int       `json:"skipped"`
}

func toSnapshotJSON(i *sandbox.SnapshotInfo) *snapshotJSON {
	if i == nil {
		return nil
	}
	return &snapshotJSON{At: i.At.UTC(), Memory: i.Memory, Bytes: i.Bytes, Files: i.Files, Skipped: i.Skipped}
}

// snapshotRequestJSON is the optional body of POST /v1/sessions/{id}/snapshot:
// Memory nil is true.
type snapshotRequestJSON struct {
	Memory *bool `json:"memory"`
}

// forkJSON is the body of POST /v1/sessions/{id}/fork: Memory nil is
// true, as for a snapshot.
type forkJSON struct {
	Count  int   `json:"count"`
	Memory *bool `json:"memory"`
}

type sessionListJSON struct {
	Sessions []sessionJSON `json:"sessions"`
}

// codeJSON is what ExecRequest and RunRequest share: what to run.
type codeJSON struct {
	Command  []string          `json:"command"`
	Language string            `json:"language"`
	Code     string            `json:"code"`
	Stdin    string            `json:"stdin"`
	Env      map[string]string `json:"env"`
}

type execJSON struct {
	codeJSON
	Cwd            string   `json:"cwd"`
	TimeoutSeconds *float64 `json:"timeout_seconds"`
}

type runJSON struct {
	codeJSON
	Limits   *limitsJSON  `json:"limits"`
	Network  *networkJSON `json:"network"`
	Template string       `json:"template"`
}

// maxSeconds bounds every duration field before conversion, so no float
// can overflow a time.Duration; the spec's own bound is lower.
const maxSeconds = float64(spec.MaxTimeout / time.Second)

func seconds(field string, f float64) (time.Duration, error) {
	if math.IsNaN(f) || f < 0 || f > maxSeconds {
		return 0, badRequest("%s: %g is out of range: use 0 up to %g seconds", field, f, maxSeconds)
	}
	return time.Duration(f * float64(time.Second)), nil
}

// limits overrides base with the fields the client gave and checks the
// result as the CLI does, so both front ends accept the same limits.
func (l *limitsJSON) limits(base spec.Limits) (spec.Limits, error) {
	if l == nil {
		return base, base.Validate()
	}
	set := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	set(&base.MemoryBytes, l.MemoryBytes)
	set(&base.Pids, l.Pids)
	set(&base.DiskBytes, l.DiskBytes)
	set(&base.OutputBytes, l.OutputBytes)
	set(&base.FileSizeBytes, l.FileSizeBytes)
	set(&base.OpenFiles, l.OpenFiles)
	if l.CPUs != nil {
		base.CPUs = *l.CPUs
	}
	var err error
	if l.CPUTimeSeconds != nil {
		if base.CPUTime, err = seconds("limits.cpu_time_seconds", *l.CPUTimeSeconds); err != nil {
			return base, err
		}
	}
	if l.TimeoutSeconds != nil {
		if base.Timeout, err = seconds("limits.timeout_seconds", *l.TimeoutSeconds); err != nil {
			return base, err
		}
	}
	return base, base.Validate()
}

func (n *networkJSON) policy() (spec.NetworkPolicy, error) {
	p := spec.NetworkPolicy{Mode: spec.NetNone}
	if n != nil {
		if n.Mode != "" {
			p.Mode = spec.NetMode(n.Mode)
		}
		p.Allow, p.Deny = n.Allow, n.Deny
	}
	return p, p.Validate()
}

// validEnvName is the spec's rule for names,
// ^[A-Za-z_][A-Za-z0-9_]{0,255}$, which OpenAPI 3.0 cannot state for map
// keys. It is not a regexp: compiling one with {0,255} at package init
// cost every process start a millisecond.
func validEnvName(k string) bool { return len(k) <= 256 && isIdentifier(k) }

// envList turns the env map into sorted KEY=VALUE pairs: sorted so the
// same request always builds the same environment.
func envList(env map[string]string) ([]string, error) {
	out := make([]string, 0, len(env))
	for k, v := range env {
		if !validEnvName(k) {
			return nil, badRequest("env: name %q is not valid: use letters, digits and _, not starting with a digit", k)
		}
		if strings.IndexByte(v, 0) >= 0 {
			return nil, badRequest("env.%s: value contains a NUL byte", k)
		}
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out, nil
}

// options builds the session's options, limits not given taking defaults.
func (c *sessionCreateJSON) options(defaults spec.Limits) (sandbox.SessionOptions, error) {
	o := sandbox.SessionOptions{Template: c.Template, AutoPause: c.AutoPause, AutoSnapshot: c.AutoSnapshot}
	var err error
	if o.Limits, err = c.Limits.limits(defaults); err != nil {
		return o, err
	}
	if o.Network, err = c.Network.policy(); err != nil {
		return o, err
	}
	if o.Env, err = envList(c.Env); err != nil {
		return o, err
	}
	if c.TTLSeconds != nil {
		if o.TTL, err = seconds("ttl_seconds", *c.TTLSeconds); err != nil {
			return o, err
		}
	}
	if c.IdleTimeoutSeconds != nil {
		if o.IdleTimeout, err = seconds("idle_timeout_seconds", *c.IdleTimeoutSeconds); err != nil {
			return o, err
		}
	}
	return o, nil
}

// request checks that exactly one of command and language+code is given
// (the spec cannot say so in a way every client generator understands)
// and builds the ExecRequest.
func (c *codeJSON) request() (sandbox.ExecRequest, error) {
	hasCommand, hasCode := len(c.Command) > 0, c.Language != "" || c.Code != ""
	switch {
	case hasCommand == hasCode:
		return sandbox.ExecRequest{}, badRequest("give exactly one of command, or language with code")
	case hasCommand && c.Command[0] == "":
		return sandbox.ExecRequest{}, badRequest("command[0]: the program name is empty")
	case hasCode && (c.Language == "" || c.Code == ""):
		return sandbox.ExecRequest{}, badRequest("language and code go together: give both")
	case hasCode && !interp.Known(c.Language):
		return sandbox.ExecRequest{}, badRequest("%v", sandbox.UnknownLanguage(c.Language))
	case hasCode && c.Stdin != "":
		return sandbox.ExecRequest{}, badRequest("stdin: only a command reads stdin; pass data to code in the code or a file")
	}
	env, err := envList(c.Env)
	if err != nil {
		return sandbox.ExecRequest{}, err
	}
	req := sandbox.ExecRequest{Command: c.Command, Language: c.Language, Code: c.Code, Env: env}
	if c.Stdin != "" {
		req.Stdin = []byte(c.Stdin)
	}
	return req, nil
}

func (e *execJSON) request() (sandbox.ExecRequest, error) {
	req, err := e.codeJSON.request()
	if err != nil {
		return req, err
	}
	req.Cwd = e.Cwd
	if e.TimeoutSeconds != nil {
		if req.Timeout, err = seconds("timeout_seconds", *e.TimeoutSeconds); err != nil {
			return req, err
		}
	}
	return req, nil
}

// request builds the run, limits not given taking defaults.
func (rj *runJSON) request(defaults spec.Limits) (sandbox.SessionOptions, sandbox.ExecRequest, error) {
	o := sandbox.SessionOptions{Template: rj.Template}
	req, err := rj.codeJSON.request()
	if err != nil {
		return o, req, err
	}
	if o.Limits, err = rj.Limits.limits(defaults); err != nil {
		return o, req, err
	}
	o.Network, err = rj.Network.policy()
	return o, req, err
}

// kind labels an exec in metrics: its language, or "command".
func kind(req sandbox.ExecRequest) string {
	if req.Language != "" {
		return req.Language
	}
	return "command"
}

func toLimitsJSON(l spec.Limits) limitsJSON {
	var j limitsJSON
	i64 := func(v int64) *int64 {
		if v == 0 {
			return nil
		}
		return &v
	}
	f64 := func(v float64) *float64 {
		if v == 0 {
			return nil
		}
		return &v
	}
	j.MemoryBytes = i64(l.MemoryBytes)
	j.Pids = i64(l.Pids)
	j.CPUs = f64(l.CPUs)
	j.DiskBytes = i64(l.DiskBytes)
	j.OutputBytes = i64(l.OutputBytes)
	j.CPUTimeSeconds = f64(l.CPUTime.Seconds())
	j.FileSizeBytes = i64(l.FileSizeBytes)
	j.OpenFiles = i64(l.OpenFiles)
	j.TimeoutSeconds = f64(l.Timeout.Seconds())
	return j
}

func toNetworkJSON(n spec.NetworkPolicy) networkJSON {
	mode := string(n.Mode)
	if mode == "" {
		mode = string(spec.NetNone)
	}
	return networkJSON{Mode: mode, Allow: n.Allow, Deny: n.Deny}
}

// toSessionListJSON is the one place a list of sessions becomes its
// wire form, for a listing and a fork alike; never null on the wire.
func toSessionListJSON(infos []sandbox.Info) sessionListJSON {
	out := sessionListJSON{Sessions: make([]sessionJSON, 0, len(infos))}
	for _, i := range infos {
		out.Sessions = append(out.Sessions, toSessionJSON(i))
	}
	return out
}

func toSessionJSON(i sandbox.Info) sessionJSON {
	return sessionJSON{
		ID:                 i.ID,
		State:              string(i.State),
		CreatedAt:          i.CreatedAt.UTC(),
		LastUsedAt:         i.LastUsedAt.UTC(),
		ExpiresAt:          i.ExpiresAt.UTC(),
		IdleTimeoutSeconds: i.IdleTimeout.Seconds(),
		Limits:             toLimitsJSON(i.Limits),
		Network:            toNetworkJSON(i.Network),
		Execs:              i.Execs,
		Reason:             i.Reason,
		Template:           sandbox.TemplateName(i.Template),
		AutoPause:          i.AutoPause,
		AutoSnapshot:       i.AutoSnapshot,
		PausedAt:           utcOrNil(i.PausedAt),
		Snapshot:           toSnapshotJSON(i.Snapshot),
	}
}

// utcOrNil is t in UTC, or nil for the zero time, which the answer leaves
// out.
func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
