//go:build !slim

package main

import (
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/warden-sandbox/warden/internal/sandbox"
	"github.com/warden-sandbox/warden/internal/template"
)

// serveTemplates opens the template store warden serve and warden mcp
// give their sessions: <state-dir>/templates, made when missing, so the
// templates the operator adds later with warden template are served
// without a restart. With state dir "none" there is no store: sessions
// run on the host's root only, and one naming a template is refused
// (sandbox.Manager says so). Servers only read the store; nothing a
// tenant sends adds or removes a template.
func serveTemplates(stateDir string, log *slog.Logger) (sandbox.Templates, error) {
	if stateDir == "none" || stateDir == "" {
		return nil, nil
	}
	abs, err := filepath.Abs(stateDir)
	if err != nil {
		return nil, fmt.Errorf("--state-dir %q: %w", stateDir, err)
	}
	s, err := template.Open(filepath.Join(abs, "templates"), template.Options{Log: log})
	if err != nil {
		return nil, fmt.Errorf("opening the template store: %w", err)
	}
	return storeTemplates{s}, nil
}
