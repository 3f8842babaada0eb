package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/state"
)

// defaultStateDir is /var/lib/warden for root, and the XDG state
// directory for anyone else.
func defaultStateDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/warden"
	}
	if d := os.Getenv("XDG_STATE_HOME"); filepath.IsAbs(d) {
		return filepath.Join(d, "warden")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "state", "warden")
	}
	return "none"
}

// openState opens the state directory, or returns nil for "none".
func openState(dir string) (*state.Dir, error) {
	if dir == "none" || dir == "" {
		return nil, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	return state.Open(abs)
}

// sweepCgroups removes, at start, the sandbox cgroups of Wardens that died
// without cleaning up (their processes died with them: each init has a
// parent-death signal), rather than waiting for the first new sandbox.
func sweepCgroups(log *slog.Logger) {
	stale, err := cgroup.Stale(cgroup.ProcessAlive)
	if err == nil && len(stale) == 0 {
		return
	}
	if err := cgroup.RemoveStale(cgroup.ProcessAlive); err != nil {
		log.Warn("removing the cgroups of Wardens that died", "err", err)
		return
	}
	log.Info("removed the cgroups of Wardens that died", "count", len(stale))
}

// stateLeft describes the session records and workspaces still in the
// state directory after every session was ended ("" if none).
func stateLeft(store *state.Dir) string {
	if store == nil {
		return ""
	}
	recs, _ := store.Sessions()
	names, _ := store.Workspaces()
	if len(recs) == 0 && len(names) == 0 {
		return ""
	}
	return fmt.Sprintf("%d session records and %d workspaces", len(recs), len(names))
}

// reportState logs what the server keeps and what it found of a previous
// server that crashed.
func reportState(log *slog.Logger, store *state.Dir, mgr *sandbox.Manager) {
	if store == nil {
		log.Info("no state directory: sessions end with this server", "flag", "--state-dir none")
		return
	}
	if !mgr.PersistsWorkspaces() {
		log.Warn("session workspaces live inside their sandboxes: a crash of the server loses them (persistent workspaces need the native backend, root and Linux 6.3 or later)", "state_dir", store.Path())
	}
	r := mgr.Recovered()
	if r.Sessions > 0 || r.Dropped > 0 {
		log.Warn("recovered the sessions of a server that stopped without ending them: they are dead, their files readable until deleted or expired",
			"state_dir", store.Path(), "sessions", r.Sessions, "workspaces_lost", r.Lost, "orphan_workspaces_removed", r.Dropped)
	}
	if r.Err != nil {
		log.Error("some session records could not be recovered", "err", r.Err)
	}
}
