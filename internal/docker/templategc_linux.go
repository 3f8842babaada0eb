package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/sys/unix"
)

// RemoveTemplateImages removes the images Warden made from templates of
// the store at store (TemplateLabel, StoreLabel) whose digest stored does
// not hold, unless a container still uses one: `warden template gc`
// calls it, so a template removed from the store leaves no image in the
// engine. It returns the images removed. When no engine answers on the
// socket (none, or a stale one a stopped engine left) it returns
// ErrNoEngine: there is nothing it could check.
func RemoveTemplateImages(ctx context.Context, store string, stored func(digest string) bool) ([]string, error) {
	e, err := NewEngine()
	if err != nil {
		return nil, err
	}
	imgs, err := e.Images(ctx, TemplateLabel)
	if noEngine(err) {
		return nil, fmt.Errorf("%w: %w", ErrNoEngine, err)
	}
	if err != nil {
		return nil, fmt.Errorf("listing the template images: %w", err)
	}
	var removed []string
	var errs []error
	for _, img := range imgs {
		if img.Labels[StoreLabel] != store || stored(img.Labels[TemplateLabel]) {
			continue
		}
		err := e.RemoveImage(ctx, img.ID)
		var ae *APIError
		switch {
		case err == nil:
			removed = append(removed, img.Labels[TemplateLabel])
		case errors.As(err, &ae) && ae.Status == http.StatusConflict:
			// A container uses it: the next gc after it ends removes it.
		default:
			errs = append(errs, fmt.Errorf("removing the image of template %s: %w", img.Labels[TemplateLabel], err))
		}
	}
	return removed, errors.Join(errs...)
}

// noEngine says err is a dial that found no socket file (ENOENT) or a
// socket no engine listens on (ECONNREFUSED, left by a stopped engine).
func noEngine(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ECONNREFUSED)
}
