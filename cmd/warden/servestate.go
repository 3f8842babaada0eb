//go:build !slim

package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/snapshot"
	"github.com/warden-sandbox/warden/internal/state"
)

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

// openSnapshots opens <state-dir>/snapshots, where sessions' snapshots
// are kept (see warden session snapshot).
func openSnapshots(store *state.Dir) (*snapshot.Store, error) {
	s, err := snapshot.Open(filepath.Join(store.Path(), "snapshots"))
	if err != nil {
		return nil, fmt.Errorf("--state-dir %s: %w", store.Path(), err)
	}
	return s, nil
}

// sweepCgroups removes, at start, the sandbox cgroups of Wardens that died
// without cleaning up (their processes died with them: each init has a
// parent-death signal), rather than waiting for the first new sandbox.
func sweepCgroups(log *slog.Logger) {
	stale, err := cgroup.Stale(boxname.Dead)
	if err == nil && len(stale) == 0 {
		return
	}
	if err := cgroup.RemoveStale(boxname.Dead); err != nil {
		log.Warn("removing the cgroups of Wardens that died", "err", err)
		return
	}
	log.Info("removed the cgroups of Wardens that died", "count", len(stale))
}

// stateLeft describes what the state directory still holds of sessions
// that should have ended with the server ("" if nothing): records of live
// sessions, and workspaces no record names. Dead sessions stay on
// purpose, for their owners to fetch their files after a restart.
func stateLeft(store *state.Dir) string {
	if store == nil {
		return ""
	}
	recs, _ := store.Sessions()
	names, _ := store.Workspaces()
	kept := map[string]bool{}
	live := 0
	for _, r := range recs {
		if r.Snapshot != "" && r.DiedAt.IsZero() {
			continue // snapshotted: kept on purpose, its box closed
		}
		if r.DiedAt.IsZero() {
			live++
		} else {
			kept[r.Workspace] = true
		}
	}
	unowned := 0
	for _, n := range names {
		if !kept[n] {
			unowned++
		}
	}
	if live == 0 && unowned == 0 {
		return ""
	}
	return fmt.Sprintf("%d records of live sessions and %d workspaces of no dead session", live, unowned)
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
	if r.Sessions > 0 || r.Dropped > 0 || r.DroppedSnapshots > 0 || r.Stale > 0 {
		log.Warn("recovered sessions: snapshotted ones resume on use, dead ones' files are readable until they are deleted or expire",
			"state_dir", store.Path(), "sessions", r.Sessions, "snapshotted", r.Snapshotted, "workspaces_lost", r.Lost,
			"orphan_workspaces_removed", r.Dropped, "orphan_snapshots_removed", r.DroppedSnapshots, "records_of_deleted_sessions_removed", r.Stale)
	}
	if r.Err != nil {
		log.Error("some session records could not be recovered", "err", r.Err)
	}
}
