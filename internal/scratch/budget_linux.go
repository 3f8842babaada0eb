package scratch

import (
	"fmt"
	"io/fs"
	"os"
	"time"
)

// The caps on what a template may seed, whatever the sandbox's --disk:
// every start on the template pays for the copy (measured: 0.4 ms a file
// on the host, 2.9 ms in a native init under load), so a template of 65k
// small files, which the default disk's inodes admit, would cost minutes
// a start. 10,000 entries keep the worst start to seconds on the host
// and under 30 s in the init; 256 MiB is the default disk's size, so a
// template that fits the default sandbox fits the cap.
const (
	MaxSeedEntries = 10_000
	MaxSeedBytes   = 256 << 20
	// MaxSeedTime bounds the copy itself, so a slow one (a loaded host, a
	// slow store) fails as the seed, naming the template, rather than as
	// the program timing out.
	MaxSeedTime = 20 * time.Second
)

// budget is what a seed may still take.
type budget struct {
	entries  int
	bytes    int64
	deadline time.Time
}

// newBudget is the caps, with within (MaxSeedTime but in tests) to copy.
func newBudget(within time.Duration) *budget {
	return &budget{entries: MaxSeedEntries, bytes: MaxSeedBytes, deadline: time.Now().Add(within)}
}

// count walks the places of roots (before any copy), charging each entry
// and each regular file's size, and stops with ErrSeedTooLarge as soon as
// the caps are passed, so a refused template costs at most the cap's
// lookups and copies nothing.
func (b *budget) count(roots map[string]*os.Root) error {
	entries, bytes := b.entries, b.bytes
	for name, r := range roots {
		err := fs.WalkDir(r.FS(), ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || p == "." {
				return err
			}
			if entries--; entries < 0 {
				return fmt.Errorf("%w: more than %d entries, the cap (commit fewer files)", ErrSeedTooLarge, MaxSeedEntries)
			}
			if d.Type().IsRegular() {
				if bytes -= entrySize(d); bytes < 0 {
					return fmt.Errorf("%w: more than %d MiB, the cap (commit smaller files)", ErrSeedTooLarge, MaxSeedBytes>>20)
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("counting the template's %s: %w", rootfsPlace(name), err)
		}
	}
	return nil
}

// charge is one more entry copied: past the deadline it fails with
// ErrSeedSlow.
func (b *budget) charge() error {
	if time.Now().After(b.deadline) {
		return fmt.Errorf("%w: it took longer than %v (commit fewer files)", ErrSeedSlow, MaxSeedTime)
	}
	return nil
}

// entrySize is d's size, 0 if it cannot be read (the copy reports that).
func entrySize(d fs.DirEntry) int64 {
	if fi, err := d.Info(); err == nil {
		return fi.Size()
	}
	return 0
}
