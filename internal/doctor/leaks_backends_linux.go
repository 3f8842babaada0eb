package doctor

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/docker"
	"github.com/warden-sandbox/warden/internal/gvisor"
	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/vmbox"
)

// backendLeaks lists what dead Wardens left for the gvisor, docker and
// microvm backends: state directories (scratch and root mounts among
// them) and containers.
// The next Warden using the backend removes them itself.
func backendLeaks() []Leak {
	var leaks []Leak
	for _, state := range []string{gvisor.StateDir, docker.StateDir, vmbox.StateDir} {
		for _, dir := range boxname.StaleDirs(state) {
			leaks = append(leaks, Leak{Kind: "backend state", What: dir,
				Why: "its Warden (the pid in its name) is gone; the next Warden on that backend removes it"})
		}
	}
	e, err := docker.NewEngine()
	if err != nil {
		return leaks
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	stale, foreign, _ := docker.StaleContainers(ctx, e)
	for _, id := range stale {
		leaks = append(leaks, Leak{Kind: "container", What: id,
			Why: "labelled " + docker.Label + " by a Warden that is gone; docker rm -f it, or start Warden with --backend docker"})
	}
	for _, id := range foreign {
		leaks = append(leaks, Leak{Kind: "container", What: id,
			Why: "foreign, not judged: labelled " + docker.Label + " by a Warden in another pid namespace (or an older Warden); no Warden here removes it, check its owner before docker rm -f"})
	}
	return leaks
}

// TemplateRoots lists, for information, the gVisor and microvm backends'
// shared roots (in memory, /run) of templates the store at dir
// (state-dir/templates; "" for none) does not hold and no box uses:
// `warden template gc` removes them. They are no leaks: a root is a cache
// shared by every store on the host, so one a test's or another store's
// box wrote is unknown to dir's store, and a box on that template writes
// it again.
func TemplateRoots(dir string) []Leak {
	stored, err := storedDigests(dir)
	if err != nil {
		return []Leak{{Kind: "template root", What: dir, Why: err.Error() + ", so its gvisor and microvm roots were not checked"}}
	}
	keep := func(d string) bool { return stored[d] }
	var roots []Leak
	for _, b := range RootBackends() {
		kind := b.Name + " root"
		unused, err := b.Unused(b.State, keep)
		if err != nil {
			roots = append(roots, Leak{Kind: kind, What: b.State, Why: "not checked: " + err.Error()})
			continue
		}
		for _, p := range unused {
			roots = append(roots, Leak{Kind: kind, What: p,
				Why: "the root of a template " + dir + " does not hold, used by no box (a cache of another store's or a gone template); warden template gc removes it"})
		}
	}
	return roots
}

// storedDigests are the digests of the templates the store at dir holds
// (none without a store), or why the store cannot be read.
func storedDigests(dir string) (map[string]bool, error) {
	stored := map[string]bool{}
	if _, err := os.Stat(dir); dir == "" || err != nil {
		return stored, nil
	}
	s, err := template.Open(dir, template.Options{})
	if err != nil {
		return nil, fmt.Errorf("the template store cannot be read (%w)", err)
	}
	ts, err := s.List()
	if err != nil {
		return nil, fmt.Errorf("the template store cannot be listed (%w)", err)
	}
	for _, t := range ts {
		stored[t.Digest] = true
	}
	return stored, nil
}
