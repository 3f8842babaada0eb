package doctor

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warden-sandbox/warden/internal/boxname"
	"github.com/warden-sandbox/warden/internal/cgroup"
	"github.com/warden-sandbox/warden/internal/nsinit"
)

// egressDirs are where Warden's egress proxy keeps its sockets: as root,
// and for the current user otherwise.
func egressDirs() []string {
	return []string{"/run/warden/egress", filepath.Join(os.TempDir(), "warden-egress-"+strconv.Itoa(os.Geteuid()))}
}

// Leaks lists what Wardens that are gone left behind. The next Warden to
// start removes stale cgroups itself; the rest says how to remove it.
// The gVisor roots of templates no store here holds are a cache, not
// leaks: TemplateRoots lists them.
func Leaks() ([]Leak, error) {
	var leaks []Leak
	stale, err := cgroup.Stale(boxname.Dead)
	for _, dir := range stale {
		leaks = append(leaks, Leak{Kind: "cgroup", What: dir, Why: "its Warden (the pid it is named after) is gone; the next warden run or serve removes it"})
	}
	procs, perr := orphanInits()
	leaks = append(leaks, procs...)
	leaks = append(leaks, backendLeaks()...)
	return append(leaks, staleSockets()...), errors.Join(err, perr)
}

// orphanInits finds sandbox inits whose Warden is gone: an init is its
// Warden's own executable (or the warden-init next to it) started as that
// Warden's child, and the kernel kills it when that parent dies; so an
// init whose parent runs anything else (init, a subreaper) was adopted,
// and is a leak.
func orphanInits() ([]Leak, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return nil, err
	}
	var leaks []Leak
	for _, path := range stats {
		cmd, err := os.ReadFile(path)
		if err != nil || !bytes.Equal(bytes.SplitN(cmd, []byte{0}, 2)[0], []byte(nsinit.Arg0)) {
			continue
		}
		dir := filepath.Dir(path)
		ppid := parentPid(dir)
		own, _ := os.Readlink(dir + "/exe")
		parent, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
		if ppid > 1 && own != "" && (own == parent || own == filepath.Join(filepath.Dir(parent), nsinit.InitName)) {
			continue
		}
		leaks = append(leaks, Leak{Kind: "process", What: filepath.Base(dir) + " " + nsinit.Arg0,
			Why: fmt.Sprintf("a sandbox init whose Warden is gone (parent %d); kill -9 it, which ends its sandbox", ppid)})
	}
	return leaks, nil
}

// parentPid reads the fourth field of /proc/<pid>/stat, after the
// command in parentheses (which may itself hold spaces).
func parentPid(dir string) int {
	b, err := os.ReadFile(dir + "/stat")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(fields) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(fields[1])
	return ppid
}

// staleSockets finds egress sockets nobody listens on: a Warden removes
// its sockets when a sandbox ends, so one left is a Warden that died.
func staleSockets() []Leak {
	var leaks []Leak
	for _, base := range egressDirs() {
		socks, _ := filepath.Glob(filepath.Join(base, "*", "proxy.sock"))
		for _, sock := range socks {
			c, err := net.DialTimeout("unix", sock, time.Second)
			if err == nil {
				c.Close()
				continue
			}
			if !errors.Is(err, syscall.ECONNREFUSED) {
				continue
			}
			leaks = append(leaks, Leak{Kind: "egress socket", What: filepath.Dir(sock),
				Why: "no proxy listens on it (its Warden is gone); remove the directory"})
		}
	}
	return leaks
}
