// Command templates measures issue 19's targets for templates against the
// host's root, each as a ratio within one run: (start) `warden run --
// python3 -c 'print(1)'` on host and on the test templates, per backend,
// rounds interleaved; (memory) the host memory each of N idle sessions
// costs on a template and on host; (pull) pulling and unpacking the
// datasci test image from an in-process registry, then templates sharing
// its layers. The test images come from internal/template/templatetest's
// cache (`make test-images`). It writes a markdown table to --out and
// stdout. Run it as root after `make build`.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/warden-sandbox/warden/bench/measure"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// options are the command line's.
type options struct {
	warden, serveWarden string
	backends, parts     []string
	templates           []string
	rounds, sessions    int
	interp              bool
	out                 string
}

func main() {
	var o options
	var backends, parts, templates string
	flag.StringVar(&o.warden, "warden", "bin/warden", "the warden binary `warden run` is timed with")
	flag.StringVar(&o.serveWarden, "serve-warden", "", "the warden binary served for the memory part (default: --warden)")
	flag.StringVar(&backends, "backends", "native,gvisor,docker", "backends the start part measures")
	flag.StringVar(&parts, "parts", "start,memory,pull", "parts to run")
	flag.StringVar(&templates, "templates", "minimal,datasci", "test images the start part measures beside host")
	flag.IntVar(&o.rounds, "rounds", 20, "timed rounds per contender in the start part (after 2 warm-ups)")
	flag.IntVar(&o.sessions, "sessions", 100, "idle sessions per contender in the memory part")
	flag.BoolVar(&o.interp, "interp", true, "start each idle session's Python interpreter in the memory part")
	flag.StringVar(&o.out, "out", "bench/results/templates.md", "where the markdown result goes")
	flag.Parse()
	o.backends, o.parts, o.templates = strings.Split(backends, ","), strings.Split(parts, ","), strings.Split(templates, ",")
	if o.serveWarden == "" {
		o.serveWarden = o.warden
	}
	if o.rounds < 1 || o.rounds > 1000 || o.sessions < 1 || o.sessions > 1000 {
		log.Fatal("--rounds and --sessions must be between 1 and 1000")
	}
	if err := run(o); err != nil {
		log.Fatal(err)
	}
}

// run prepares a state directory with the test templates, runs the parts
// and writes the report.
func run(o options) error {
	ctx := context.Background()
	images, err := templatetest.Build(ctx, os.Stderr)
	if err != nil {
		return fmt.Errorf("getting the test images (make test-images): %w", err)
	}
	state, err := os.MkdirTemp("", "bench-templates-")
	if err != nil {
		return fmt.Errorf("making a state directory: %w", err)
	}
	defer removeAll(state)
	var b strings.Builder
	fmt.Fprintf(&b, "# Templates against host (%s)\n\n%s; load average %s at the start.\n\n",
		time.Now().UTC().Format("2006-01-02 15:04 UTC"), measure.Machine(), loadavg())
	fmt.Fprintf(&b, "Command: `%s`\n\n", strings.Join(os.Args, " "))
	needStore := slices.Contains(o.parts, "start") || slices.Contains(o.parts, "memory")
	if needStore {
		if err := importImages(o.warden, state, images); err != nil {
			return err
		}
	}
	for _, p := range o.parts {
		var err error
		switch p {
		case "start":
			err = startPart(&b, o, state)
		case "memory":
			err = memoryPart(&b, o, state)
		case "pull":
			err = pullPart(ctx, &b, images)
		default:
			err = fmt.Errorf("unknown part %q: use start, memory or pull", p)
		}
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "Load average after %s: %s.\n\n", p, loadavg())
		// Written after each part, so a later part's failure keeps it.
		if err := os.WriteFile(o.out, []byte(b.String()), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
	}
	fmt.Print(b.String())
	return nil
}

// importImages imports every test image into state's template store
// with the binary under test, named after the image.
func importImages(warden, state, images string) error {
	for _, n := range templatetest.Names() {
		out, err := output(warden, "template", "import", "--state-dir", state, "--name", n,
			filepath.Join(images, n, "layout"))
		if err != nil {
			return fmt.Errorf("importing %s: %w: %s", n, err, measure.Tail(out))
		}
	}
	return nil
}

// loadavg is /proc/loadavg's three averages.
func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Join(strings.Fields(string(b))[:3], " ")
}

// removeAll removes a directory the benchmark made, logging a failure.
func removeAll(dir string) {
	if err := os.RemoveAll(dir); err != nil {
		log.Printf("removing %s: %v", dir, err)
	}
}
