package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/wardenserve"
)

// tenants is the server under test with its two keys: A, the victim whose
// latency is measured, and B, the hostile tenant.
type tenants struct {
	srv  *wardenserve.Server
	a, b *wardenserve.Client
	keyB string
}

// requestTimeout bounds every request of the benchmark: a request that
// takes longer counts as an error.
const requestTimeout = 60 * time.Second

// startTenants starts warden serve with two fresh keys and the extra
// flags that this binary knows.
func startTenants(o options, log io.Writer) (*tenants, error) {
	keyA, keyB := randomKey(), randomKey()
	srv, err := wardenserve.Start(wardenserve.Options{Warden: o.warden, Keys: []string{keyA, keyB}, Args: o.serveArgs, Stderr: log})
	if err != nil {
		return nil, err
	}
	return &tenants{srv: srv, a: srv.Client(keyA, requestTimeout), b: srv.Client(keyB, requestTimeout), keyB: keyB}, nil
}

func randomKey() string {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		panic(fmt.Sprintf("reading random bytes: %v", err))
	}
	return "bench-" + hex.EncodeToString(b)
}

var flagName = regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)`)

// serveFlags are the flags `warden serve --help` of this binary lists.
func serveFlags(warden string) (map[string]bool, error) {
	out, err := exec.Command(warden, "serve", "--help").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%s serve --help: %w", warden, err)
	}
	return parseFlags(string(out)), nil
}

// parseFlags are the long flag names of a cobra help text.
func parseFlags(help string) map[string]bool {
	flags := map[string]bool{}
	for _, line := range strings.Split(help, "\n") {
		if m := flagName.FindStringSubmatch(line); m != nil {
			flags[m[1]] = true
		}
	}
	return flags
}

// filterServeArgs keeps the --serve-flag values whose flag this binary
// has and returns the others, so one command line works before and after
// a fix that adds flags.
func filterServeArgs(warden string, args []string) (kept, dropped []string, err error) {
	known, err := serveFlags(warden)
	if err != nil {
		return nil, nil, err
	}
	for _, a := range args {
		name := strings.TrimLeft(strings.SplitN(a, "=", 2)[0], "-")
		if known[name] {
			kept = append(kept, a)
		} else {
			dropped = append(dropped, a)
		}
	}
	return kept, dropped, nil
}

// serveLog opens where the server's log goes: a file given with
// --serve-log, or nowhere.
func serveLog(path string) (io.WriteCloser, error) {
	if path == "" {
		return nopCloser{io.Discard}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("opening the server log: %w", err)
	}
	return f, nil
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// removeAll deletes B's sessions, a few at a time, within a bound.
func (c *tenants) removeAll(ids []string) {
	jobs := make(chan string)
	done := make(chan struct{})
	for w := 0; w < 8; w++ {
		go func() {
			for id := range jobs {
				c.b.Remove(id)
			}
			done <- struct{}{}
		}()
	}
	for _, id := range ids {
		jobs <- id
	}
	close(jobs)
	for w := 0; w < 8; w++ {
		<-done
	}
	if len(ids) > 0 {
		log.Printf("deleted %d sessions of key B", len(ids))
	}
}
