package sandbox

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/workspace"
)

// remoteBackend makes boxes that serve their own files (RemoteFiler),
// as a Pod's do, or refuse to (unsupported) and leave them to the host.
type remoteBackend struct {
	*fakeBackend
	unsupported bool
	box         *agentFilesBox
}

func (r *remoteBackend) Start(ctx context.Context, s spec.Spec) (Box, error) {
	b, err := r.fakeBackend.Start(ctx, s)
	if err != nil {
		return nil, err
	}
	r.box = &agentFilesBox{fakeBox: b.(*fakeBox), unsupported: r.unsupported}
	return r.box, nil
}

// agentFilesBox is a fakeBox whose agent serves its files: stubFiles, made
// with the limits the session asked for.
type agentFilesBox struct {
	*fakeBox
	unsupported bool
	lim         workspace.Limits
}

func (x *agentFilesBox) RemoteFiles(lim workspace.Limits) (workspace.Files, error) {
	if x.unsupported {
		return nil, errors.ErrUnsupported
	}
	x.lim = lim
	return stubFiles{}, nil
}

// stubFiles stands for the agent's files: every call says it is the stub.
type stubFiles struct{}

var errStub = errors.New("the stub files")

func (stubFiles) Stat(string) (workspace.Entry, error)   { return workspace.Entry{}, errStub }
func (stubFiles) List(string) ([]workspace.Entry, error) { return nil, errStub }
func (stubFiles) Read(string) (io.ReadCloser, workspace.Entry, error) {
	return nil, workspace.Entry{}, errStub
}
func (stubFiles) Write(string, io.Reader, fs.FileMode) (workspace.Entry, error) {
	return workspace.Entry{}, errStub
}
func (stubFiles) Mkdir(string) (workspace.Entry, error)          { return workspace.Entry{}, errStub }
func (stubFiles) Remove(string, bool) error                      { return errStub }
func (stubFiles) Rename(string, string) (workspace.Entry, error) { return workspace.Entry{}, errStub }
func (stubFiles) AddWatch(int, string, uint32) (int, error)      { return -1, errStub }
func (stubFiles) Owner() (int, int)                              { return 7, 7 }
func (stubFiles) Close() error                                   { return nil }

// TestFilesThroughTheAgent: a box that serves its own files is reached
// through them, with the session's file limits (its file-size limit
// too), and a paused one resumes for the call; a box that does not is
// reached through its Workspace, which a box without one refuses.
func TestFilesThroughTheAgent(t *testing.T) {
	for _, unsupported := range []bool{false, true} {
		b := &remoteBackend{fakeBackend: &fakeBackend{}, unsupported: unsupported}
		m := NewManager(b, Config{Files: workspace.Limits{MaxEntries: 5}})
		t.Cleanup(func() { m.Close() })
		ctx := context.Background()
		o := defaultOptions()
		o.Limits.FileSizeBytes = 1000
		info, err := m.Create(ctx, "alice", o)
		if err != nil {
			t.Fatalf("Create() = %v", err)
		}
		if _, err := m.Pause(ctx, "alice", info.ID); err != nil {
			t.Fatalf("Pause() = %v", err)
		}
		s, _ := m.lookupCtx(context.Background(), "alice", info.ID)
		clock := &fakeClock{}
		clock.install(s.pace)
		before := s.pace.lim.TokensAt(clock.t)
		files, err := m.Files(context.Background(), "alice", info.ID)
		paid := before - s.pace.lim.TokensAt(clock.t)
		if unsupported {
			if err == nil || !strings.Contains(err.Error(), "not on this host") {
				t.Errorf("Files() of a box with neither = %v, %v; want the host's path refusing a box without a workspace", files, err)
			}
			if !b.box.isPaused() {
				t.Errorf("a box whose files the host reaches was resumed for a file call")
			}
			continue
		}
		if _, ok := files.(stubFiles); !ok || err != nil {
			t.Fatalf("Files() = %T, %v; want the agent's files", files, err)
		}
		if b.box.lim.MaxEntries != 5 || b.box.lim.MaxFileBytes != 1000 {
			t.Errorf("the agent's files got limits %+v, want the Manager's entries (5) and the session's file size (1000)", b.box.lim)
		}
		if b.box.isPaused() {
			t.Errorf("the paused box was not resumed for a file call its agent serves")
		}
		if paid != commandExecCost {
			t.Errorf("resuming for a file call took %g tokens, want %d (as a resume)", paid, commandExecCost)
		}
	}
}
