// Command testimages builds the offline test images into their cache (as
// `make test-images` does before the suite runs), or does nothing when the
// cache already holds them, and prints where they are.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/warden-sandbox/warden/internal/template/templatetest"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Minute)
	defer cancel()
	start := time.Now()
	dir, err := templatetest.Build(ctx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test images:", err)
		os.Exit(1)
	}
	fmt.Printf("test images %v in %s (%.1f s)\n", templatetest.Names(), dir, time.Since(start).Seconds())
}
