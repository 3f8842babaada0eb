package main

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/scratch"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/state"
	"github.com/warden-sandbox/warden/internal/template"
)

func newTemplateCommitCmd(o *templateOpts) *cobra.Command {
	var share string
	cmd := &cobra.Command{
		Use:   "commit SESSION NAME",
		Short: "Store a session's home and /workspace as a new template on top of its own",
		Long: `Commit reads the files a live (or dead, kept) session made in its home
(/home/sandbox) and /workspace, from the state directory of the warden serve
that runs it (--state-dir, the native backend's host-side scratch), and stores
them as template NAME: the session's template with one more layer. A session
on NAME starts with those files in its home and /workspace. /tmp is not kept,
nor anything else (the root is read-only). The session keeps running.

The new template holds the session's files, so by default only the tenant
that owned the session (its API key's) may list it and start sessions on it;
to every other tenant it is a template that does not exist. --share-with
widens that: "all" (every tenant of every server sharing this --state-dir)
or tenant ids separated by commas (a key's tenant id is the owner in warden
serve's request log: the first 16 hex digits of the key's SHA-256).
warden template ls shows whom each template is shared with.`,
		Example: `  warden template commit ses_4Qm9cX2pLr7vTz1bNk8wYd datasci-with-model`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			info, base, err := o.commit(args[0], args[1], share)
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintln(cmd.ErrOrStderr(), shareNote(info.Template)); err != nil {
				return err
			}
			if w := widenNote(base, info.SharedWith); w != "" {
				if _, err := fmt.Fprintln(cmd.ErrOrStderr(), w); err != nil {
					return err
				}
			}
			return printInstalled(cmd, info)
		},
	}
	cmd.Flags().StringVar(&share, "share-with", "", `who may use the template: "all", or tenant ids separated by commas (default: the session's own tenant)`)
	return cmd
}

// shareNote is the line commit prints: whom the session's files now go
// to.
func shareNote(t template.Template) string {
	if t.ShareText() == template.Everyone {
		return fmt.Sprintf("warning: template %s, with the session's home and /workspace, is usable by every tenant of every server sharing this --state-dir", t.Name)
	}
	return fmt.Sprintf("template %s is usable only by tenant %s (widen with --share-with)", t.Name, t.ShareText())
}

// widenNote is the one-line warning commit prints when the new template
// reaches tenants who may not use its base (whose files it holds too),
// or "". A warning, not a refusal: --share-with is already the operator's
// explicit choice, and the default (the session's tenant, who could use
// the base when the session started) widens only a base narrowed since.
func widenNote(base template.Template, shareWith []string) string {
	var gain []string
	for _, t := range shareWith {
		if !base.UsableBy(t) {
			gain = append(gain, template.Template{Ref: base.Name, SharedWith: []string{t}}.ShareText())
		}
	}
	if len(gain) == 0 {
		return ""
	}
	who := "every tenant"
	if !slices.Contains(shareWith, template.Everyone) {
		who = "tenant " + strings.Join(gain, ",")
	}
	return fmt.Sprintf("warning: the commit gives %s the files of base template %s (shared with %s), which they may not use themselves", who, base.Name, base.ShareText())
}

// commit stores session id's kept scratch as template name, shared with
// share's tenants ("": the session's own), and returns it with the base
// template it was made on.
func (o *templateOpts) commit(id, name, share string) (template.Info, template.Template, error) {
	if err := template.ValidName(name); err != nil {
		return template.Info{}, template.Template{}, err
	}
	var shareWith []string
	if share != "" {
		var err error
		if shareWith, err = template.ParseShare(share); err != nil {
			return template.Info{}, template.Template{}, err
		}
	}
	s, err := o.store()
	if err != nil {
		return template.Info{}, template.Template{}, err
	}
	dir, err := filepath.Abs(o.stateDir)
	if err != nil {
		return template.Info{}, template.Template{}, fmt.Errorf("--state-dir %q: %w", o.stateDir, err)
	}
	rec, scratchDir, err := state.Peek(dir, id)
	switch {
	case err != nil:
		return template.Info{}, template.Template{}, err
	case rec.Template == "":
		return template.Info{}, template.Template{}, fmt.Errorf(`session %s runs on "host", which is not a stored template: commit a session made with a template (template NAME on create)`, id)
	case scratchDir == "":
		return template.Info{}, template.Template{}, fmt.Errorf("session %s keeps its files inside its sandbox (backend %s): commit reads the host-side scratch of the native backend", id, rec.Backend)
	}
	max, err := spec.ParseSize(o.maxSize)
	if err != nil {
		return template.Info{}, template.Template{}, fmt.Errorf("--max-size %q: %w", o.maxSize, err)
	}
	if shareWith == nil {
		shareWith = []string{rec.Owner}
	}
	base, err := s.Get(rec.Template) // Commit reports a base gone since
	if err != nil {
		base = template.Template{}
	}
	info, err := commitLayer(s, rec.Template, rec.TemplateDigest, scratchDir, name, max, shareWith)
	return info, base, err
}

// commitLayer streams the scratch's layer into the store's Commit.
func commitLayer(s *template.Store, base, baseDigest, scratchDir, name string, max int64, shareWith []string) (template.Info, error) {
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := scratch.Layer(pw, scratchDir, max)
		pw.CloseWithError(err) // always nil: it only records err for the reader
		done <- err
	}()
	info, err := s.Commit(base, baseDigest, pr, name, shareWith)
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
