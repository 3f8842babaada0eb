package doctor

import (
	"context"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/docker"
	"github.com/warden-sandbox/warden/internal/gvisor"
)

// backendLeaks lists what dead Wardens left for the gvisor and docker
// backends: state directories (scratch mounts among them) and containers.
// The next Warden using the backend removes them itself.
func backendLeaks() []Leak {
	var leaks []Leak
	for _, dir := range append(boxname.StaleDirs(gvisor.StateDir), boxname.StaleDirs(docker.StateDir)...) {
		leaks = append(leaks, Leak{Kind: "backend state", What: dir,
			Why: "its Warden (the pid in its name) is gone; the next Warden on that backend removes it"})
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
