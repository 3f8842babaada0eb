package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/scratch"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/template"
)

func newTemplateCommitCmd(o *templateOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "commit SESSION NAME",
		Short: "Store a session's home and /workspace as a new template on top of its own",
		Long: `Commit reads the files a live (or dead, kept) session made in its home
(/home/sandbox) and /workspace, from the state directory of the warden serve
that runs it (--state-dir, the native backend's host-side scratch), and stores
them as template NAME: the session's template with one more layer. A session
on NAME starts with those files in its home and /workspace. /tmp is not kept,
nor anything else (the root is read-only). The session keeps running.

The new template is visible to, and usable by, every tenant of every server
sharing this --state-dir, with the session's files in it: commit only a
session whose home and /workspace every tenant may read.`,
		Example: `  warden template commit ses_4Qm9cX2pLr7vTz1bNk8wYd datasci-with-model`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, err := o.commit(args[0], args[1])
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(cmd.ErrOrStderr(), commitWarning(info.Name)); err != nil {
				return err
			}
			return printInstalled(cmd, info)
		},
	}
}

// commitWarning is the line commit prints: templates have no owner yet,
// so a committed home is every tenant's to read.
func commitWarning(name string) string {
	return fmt.Sprintf("warning: template %s, with the session's home and /workspace, is visible to every tenant of every server sharing this --state-dir", name)
}

// commit stores session id's kept scratch as template name.
func (o *templateOpts) commit(id, name string) (template.Info, error) {
	if err := template.ValidName(name); err != nil {
		return template.Info{}, err
	}
	s, err := o.store()
	if err != nil {
		return template.Info{}, err
	}
	dir, err := filepath.Abs(o.stateDir)
	if err != nil {
		return template.Info{}, fmt.Errorf("--state-dir %q: %w", o.stateDir, err)
	}
	rec, scratchDir, err := state.Peek(dir, id)
	switch {
	case err != nil:
		return template.Info{}, err
	case rec.Template == "":
		return template.Info{}, fmt.Errorf(`session %s runs on "host", which is not a stored template: commit a session made with a template (template NAME on create)`, id)
	case scratchDir == "":
		return template.Info{}, fmt.Errorf("session %s keeps its files inside its sandbox (backend %s): commit reads the host-side scratch of the native backend", id, rec.Backend)
	}
	max, err := spec.ParseSize(o.maxSize)
	if err != nil {
		return template.Info{}, fmt.Errorf("--max-size %q: %w", o.maxSize, err)
	}
	return commitLayer(s, rec.Template, rec.TemplateDigest, scratchDir, name, max)
}

// commitLayer streams the scratch's layer into the store's Commit.
func commitLayer(s *template.Store, base, baseDigest, scratchDir, name string, max int64) (template.Info, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := scratch.Layer(pw, scratchDir, max)
		pw.CloseWithError(err) // always nil: it only records err for the reader
		done <- err
	}()
	info, err := s.Commit(base, baseDigest, pr, name)
	pr.CloseWithError(errors.New("the commit stopped reading")) // always nil; unblocks Layer's write
	lerr := <-done
	switch {
	case err != nil: // it carries Layer's own error when that came first
		return info, err
	case lerr != nil:
		return info, fmt.Errorf("reading the session's files: %w", lerr)
	}
	return info, nil
}
