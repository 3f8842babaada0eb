package docker

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// RemoveTemplateImages removes the images Warden made from templates of
// the store at store (TemplateLabel, StoreLabel) whose digest stored does
// not hold, unless a container still uses one: `warden template gc`
// calls it, so a template removed from the store leaves no image in the
// engine. It returns the images removed. Without an engine on this host
// (no socket) there is nothing to do.
func RemoveTemplateImages(ctx context.Context, store string, stored func(digest string) bool) ([]string, error) {
	if os.Getenv("DOCKER_HOST") == "" {
		if _, err := os.Stat("/var/run/docker.sock"); err != nil {
			return nil, nil
		}
	}
	e, err := NewEngine()
	if err != nil {
		return nil, err
	}
	imgs, err := e.Images(ctx, TemplateLabel)
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
