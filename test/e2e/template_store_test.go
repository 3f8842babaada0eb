package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warden-sandbox/warden/internal/template"
	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

// importTimeout bounds one test image's import into the shared store
// (datasci, hundreds of MB, took about 4 minutes on a loaded CI host).
const importTimeout = 10 * time.Minute

// sharedStore is the one template store of this e2e process: each test
// image is imported into it once, whichever test asks first, so the
// images' common base layer is unpacked once and no test pays for an
// import another already made. Tests share its state directory
// (sharedTemplates) and give what they commit unique names (uniqueName).
var sharedStore struct {
	mu       sync.Mutex
	dir      string
	imported map[string]error // image name: its import's outcome
}

// commitSeq numbers uniqueName's names within this process (go test
// -count runs a test again against the same store).
var commitSeq atomic.Int64

// sharedTemplates returns the process's shared --state-dir, whose store
// holds package templatetest's images (as templates of the same names),
// importing those not there yet. Each test's own state directory cannot
// link to the store: a template's root must be reached without symbolic
// links. Tests run one at a time, each stopping its server when it ends.
// templatetest.Image skips t when an image cannot be built (fails it
// under WARDEN_CI=1).
func sharedTemplates(t *testing.T, images ...string) string {
	t.Helper()
	requireSandbox(t)
	for _, name := range images {
		layout, _ := templatetest.Image(t, name)
		if err := importShared(name, layout); err != nil {
			t.Fatalf("importing %s into the shared store: %v", name, err)
		}
	}
	return sharedState()
}

// sharedState is the shared state directory, in the process's temporary
// directory (removed when the process ends).
func sharedState() string {
	return filepath.Join(filepath.Dir(wardenBin), "state")
}

// importShared imports the image at layout as template name into the
// shared store, once per process (a failure is kept and reported to every
// later caller).
func importShared(name, layout string) error {
	sharedStore.mu.Lock()
	defer sharedStore.mu.Unlock()
	if sharedStore.dir == "" {
		sharedStore.dir = filepath.Join(sharedState(), "templates")
		sharedStore.imported = map[string]error{}
	}
	if err, done := sharedStore.imported[name]; done {
		return err
	}
	s, err := template.Open(sharedStore.dir, template.Options{})
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), importTimeout)
		start := time.Now()
		var info template.Info
		info, err = s.Import(ctx, layout, name)
		cancel()
		if err == nil {
			fmt.Fprintf(os.Stderr, "e2e: imported %s into the shared store in %s (%d layers unpacked, %d already stored)\n",
				name, time.Since(start).Round(time.Millisecond), info.Unpacked, info.Reused)
		}
	}
	if err != nil {
		err = fmt.Errorf("(bounded by %s): %w", importTimeout, err)
	}
	sharedStore.imported[name] = err
	return err
}

// uniqueName is prefix made unique in the shared store, for a template a
// test commits.
func uniqueName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, commitSeq.Add(1))
}
