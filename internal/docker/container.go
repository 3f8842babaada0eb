package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// ContainerConfig is the part of the Engine API's create body Warden uses.
type ContainerConfig struct {
	Image      string
	Entrypoint []string
	Cmd        []string `json:",omitempty"`
	User       string
	Hostname   string
	Env        []string
	WorkingDir string
	Labels     map[string]string
	HostConfig HostConfig
	// NetworkDisabled keeps the container off every network but lo.
	NetworkDisabled bool
}

// HostConfig is the part of the Engine API's HostConfig Warden uses.
type HostConfig struct {
	Binds       []string
	NetworkMode string
	IpcMode     string
	// CgroupnsMode "private" gives the container its own cgroup
	// namespace (API 1.41).
	CgroupnsMode   string
	CapDrop        []string
	CapAdd         []string
	SecurityOpt    []string `json:",omitempty"`
	ReadonlyRootfs bool
	Memory         int64 `json:",omitempty"`
	MemorySwap     int64 `json:",omitempty"`
	NanoCPUs       int64 `json:",omitempty"`
	PidsLimit      int64 `json:",omitempty"`
	// CpusetCpus confines the container to these CPUs ("0,3").
	CpusetCpus string `json:",omitempty"`
	// MaskedPaths replace Docker's default list, so they include it.
	MaskedPaths   []string
	ReadonlyPaths []string
}

// Create makes a container named name and returns its id.
func (e *Engine) Create(ctx context.Context, name string, c ContainerConfig) (string, error) {
	var out struct {
		ID string `json:"Id"`
	}
	err := e.call(ctx, http.MethodPost, "/containers/create", url.Values{"name": {name}}, c, &out)
	return out.ID, err
}

// Start starts a created container.
func (e *Engine) Start(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+id+"/start", nil, nil, nil)
}

// Kill sends SIGKILL to the container's PID 1.
func (e *Engine) Kill(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/containers/"+id+"/kill", url.Values{"signal": {"KILL"}}, nil, nil)
}

// Pause stops every process of a running container where it stands (the
// engine freezes its cgroup), keeping its memory. When the engine answers
// that the container is paused already, the container's state is read
// back: only a container the engine reports paused counts as done.
//
// runc's "unable to freeze" is tried again, at most pauseTries times in
// all, while ctx lasts: on cgroup v1, runc (1.1) gives a freeze some 1000
// writes of FROZEN, a few hundred milliseconds, and thaws the cgroup
// every 50 of them, so a box whose tasks are busy on a loaded host often
// has not stopped when it gives up (docs/sessions.md has figures). runc then
// thaws the container and the engine keeps it running, which is read
// back before each new try: a container in any other state is not paused
// again. An error after more than one try says how many were made.
func (e *Engine) Pause(ctx context.Context, id string) error {
	err := e.call(ctx, http.MethodPost, "/containers/"+id+"/pause", nil, nil, nil)
	try := 1
	for ; try < pauseTries && says(err, "unable to freeze") && ctx.Err() == nil; try++ {
		if rerr := e.isIn(ctx, id, false, err); rerr != nil {
			return rerr
		}
		err = e.call(ctx, http.MethodPost, "/containers/"+id+"/pause", nil, nil, nil)
	}
	if says(err, "is already paused") {
		return e.isIn(ctx, id, true, err)
	}
	if err != nil && try > 1 {
		return fmt.Errorf("pausing after %d tries: %w", try, err)
	}
	return err
}

// pauseTries bounds the engine pauses one Pause makes when runc could
// not freeze the container in time (see Pause).
const pauseTries = 5

// Unpause lets a paused container's processes run again. When the engine
// answers that the container is not paused, its state is read back: only
// a container the engine reports running and not paused counts as done.
// runc's "cannot resume a running process" is an error: the engine then
// still records the container paused, and what it runs is not known.
func (e *Engine) Unpause(ctx context.Context, id string) error {
	err := e.call(ctx, http.MethodPost, "/containers/"+id+"/unpause", nil, nil, nil)
	if !says(err, "is not paused") {
		return err
	}
	return e.isIn(ctx, id, false, err)
}

// isIn says whether the engine reports container id paused (want true) or
// running and not paused (want false), after the engine answered said:
// nil when it is, else an error naming what the engine reports.
func (e *Engine) isIn(ctx context.Context, id string, paused bool, said error) error {
	var out struct {
		State struct{ Paused, Running bool }
	}
	if err := e.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, nil, &out); err != nil {
		return fmt.Errorf("%w; reading the container's state back: %w", said, err)
	}
	if out.State.Running && out.State.Paused == paused {
		return nil
	}
	return fmt.Errorf("%w; the engine reports the container running %v, paused %v", said, out.State.Running, out.State.Paused)
}

// says tells whether err is the engine's answer with a message holding
// msg: the engine answers "already in that state" with a 500 or a 409,
// depending on its version, and no code of its own.
func says(err error, msg string) bool {
	var ae *APIError
	return errors.As(err, &ae) && strings.Contains(ae.Message, msg)
}

// Remove removes a container, killing it first, with its anonymous volumes.
func (e *Engine) Remove(ctx context.Context, id string) error {
	err := e.call(ctx, http.MethodDelete, "/containers/"+id, url.Values{"force": {"1"}, "v": {"1"}}, nil, nil)
	if IsNotFound(err) {
		return nil
	}
	return err
}

// Wait blocks until the container next stops and returns its exit
// status, 128+n where signal n ended its PID 1; called before Start, it
// sees the container's whole run.
func (e *Engine) Wait(ctx context.Context, id string) (int, error) {
	var out struct{ StatusCode int }
	err := e.call(ctx, http.MethodPost, "/containers/"+id+"/wait", url.Values{"condition": {"next-exit"}}, nil, &out)
	return out.StatusCode, err
}

// Pid is the host pid of the container's PID 1, or 0 when it is not running.
func (e *Engine) Pid(ctx context.Context, id string) (int, error) {
	var out struct{ State struct{ Pid int } }
	err := e.call(ctx, http.MethodGet, "/containers/"+id+"/json", nil, nil, &out)
	return out.State.Pid, err
}

// Container is one entry of List.
type Container struct {
	ID     string `json:"Id"`
	Labels map[string]string
}

// List lists every container, running or not, carrying label.
func (e *Engine) List(ctx context.Context, label string) ([]Container, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	var out []Container
	err := e.call(ctx, http.MethodGet, "/containers/json", url.Values{"all": {"1"}, "filters": {string(f)}}, nil, &out)
	return out, err
}

// ImageVolumes lists the paths image ref declares as volumes.
func (e *Engine) ImageVolumes(ctx context.Context, ref string) ([]string, error) {
	var out struct {
		Config struct{ Volumes map[string]struct{} }
	}
	if err := e.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, &out); err != nil {
		return nil, err
	}
	var vs []string
	for v := range out.Config.Volumes {
		vs = append(vs, v)
	}
	return vs, nil
}

// HasImage says the engine has the image ref.
func (e *Engine) HasImage(ctx context.Context, ref string) (bool, error) {
	err := e.call(ctx, http.MethodGet, "/images/"+ref+"/json", nil, nil, nil)
	if IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// Import makes image repo:tag from a tar of a root file system, with the
// Dockerfile instructions changes (LABEL ...) applied to its config.
func (e *Engine) Import(ctx context.Context, repo, tag string, tarball io.Reader, changes ...string) error {
	q := url.Values{"fromSrc": {"-"}, "repo": {repo}, "tag": {tag}}
	if len(changes) > 0 {
		q["changes"] = changes
	}
	return e.createImage(ctx, q, tarball)
}

// Load makes the images of a docker-save archive (images/load), whose
// answer is a stream of messages too: it must name an image loaded.
func (e *Engine) Load(ctx context.Context, archive io.Reader) error {
	var stream rawBody
	if err := e.call(ctx, http.MethodPost, "/images/load", url.Values{"quiet": {"1"}}, archive, &stream); err != nil {
		return err
	}
	return loadError(stream)
}

// createImage calls images/create and reads its progress stream, where
// an import that fails after the engine has answered 200 says so.
func (e *Engine) createImage(ctx context.Context, q url.Values, body io.Reader) error {
	var stream rawBody
	if err := e.call(ctx, http.MethodPost, "/images/create", q, body, &stream); err != nil {
		return err
	}
	return progressError(stream)
}

// Logs is the end of what the container's PID 1 wrote, for errors.
func (e *Engine) Logs(ctx context.Context, id string) (string, error) {
	q := url.Values{"stdout": {"1"}, "stderr": {"1"}, "tail": {"20"}}
	var raw rawBody
	if err := e.call(ctx, http.MethodGet, "/containers/"+id+"/logs", q, nil, &raw); err != nil {
		return "", err
	}
	return demux(raw), nil
}

// rawBody, as call's out, takes an answer that is not JSON as it came.
type rawBody []byte

// demux strips the 8-byte frame headers of a non-TTY log stream.
func demux(b []byte) string {
	var out []byte
	for len(b) >= 8 {
		n := int(b[4])<<24 | int(b[5])<<16 | int(b[6])<<8 | int(b[7])
		b = b[8:]
		n = min(n, len(b))
		out, b = append(out, b[:n]...), b[n:]
	}
	return string(out)
}

// Image is one entry of Images.
type Image struct {
	ID       string `json:"Id"`
	RepoTags []string
	Labels   map[string]string
}

// Images lists the images carrying label.
func (e *Engine) Images(ctx context.Context, label string) ([]Image, error) {
	f, _ := json.Marshal(map[string][]string{"label": {label}})
	var out []Image
	err := e.call(ctx, http.MethodGet, "/images/json", url.Values{"filters": {string(f)}}, nil, &out)
	return out, err
}

// RemoveImage removes image ref, unless a container uses it (the
// engine's 409, an APIError).
func (e *Engine) RemoveImage(ctx context.Context, ref string) error {
	return e.call(ctx, http.MethodDelete, "/images/"+ref, nil, nil, nil)
}
