package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/docker"
	"github.com/warden-sandbox/warden/internal/doctor"
	"github.com/warden-sandbox/warden/internal/spec"
	"github.com/warden-sandbox/warden/internal/template"
)

// templateOpts are the flags every template subcommand shares.
type templateOpts struct {
	stateDir   string
	maxSize    string
	maxEntries int64
}

// store opens <state-dir>/templates with the caps from the flags.
func (o *templateOpts) store() (*template.Store, error) {
	if o.stateDir == "none" || o.stateDir == "" {
		return nil, fmt.Errorf(`templates live in the state directory: pass --state-dir DIR (not "none")`)
	}
	dir, err := filepath.Abs(o.stateDir)
	if err != nil {
		return nil, fmt.Errorf("--state-dir %q: %w", o.stateDir, err)
	}
	max, err := spec.ParseSize(o.maxSize)
	if err != nil {
		return nil, fmt.Errorf("--max-size %q: %w", o.maxSize, err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return template.Open(filepath.Join(dir, "templates"), template.Options{MaxBytes: max, MaxEntries: o.maxEntries, Log: log})
}

func newTemplateCmd() *cobra.Command {
	o := &templateOpts{}
	cmd := &cobra.Command{
		Use:   "template",
		Short: "Manage templates: OCI images as sandbox roots (operator only)",
		Long: `A template is a named, read-only root filesystem made from an OCI image, kept
in the store under --state-dir. "host" (the host's own root) is the default and
is never stored.`,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.stateDir, "state-dir", defaultStateDir(), "the state directory whose templates/ holds the store (as warden serve's)")
	f.StringVar(&o.maxSize, "max-size", "4GiB", "cap on what one pull or import may download and unpack")
	f.Int64Var(&o.maxEntries, "max-entries", template.DefaultMaxEntries, "cap on the files one pull or import may unpack")
	cmd.AddCommand(newTemplatePullCmd(o), newTemplateImportCmd(o), newTemplateLsCmd(o), newTemplateRmCmd(o), newTemplateGCCmd(o), newTemplateCommitCmd(o), newTemplateShareCmd(o))
	return cmd
}

func printInstalled(cmd *cobra.Command, info template.Info) error {
	_, err := fmt.Fprintf(cmd.OutOrStdout(), "%s\t%s\t%d layers unpacked, %d already stored\n", info.Name, info.Digest, info.Unpacked, info.Reused)
	return err
}

func newTemplateLsCmd(o *templateOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the templates",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.store()
			if err != nil {
				return err
			}
			ts, err := s.List()
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tDIGEST\tSIZE\tCREATED\tSHARED WITH\tFROM")
			for _, t := range ts {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Digest, humanBytes(t.Size), t.Created.Format("2006-01-02 15:04"), t.ShareText(), t.Ref)
			}
			return tw.Flush()
		},
	}
}

func newTemplateRmCmd(o *templateOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove a template (its layers stay until gc)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.store()
			if err != nil {
				return err
			}
			if err := s.Remove(args[0]); err != nil {
				return err
			}
			return gcTemplateRoots(cmd, s)
		},
	}
}

func newTemplateGCCmd(o *templateOpts) *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "Remove the layers no template uses, and the gvisor and microvm roots and docker images of removed templates",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := o.store()
			if err != nil {
				return err
			}
			rep, err := s.GC()
			if err != nil {
				return err
			}
			if _, err := fmt.Fprintf(cmd.OutOrStdout(), "removed %d layers, freed %s\n", rep.Layers, humanBytes(rep.BytesFreed)); err != nil {
				return err
			}
			return errors.Join(gcTemplateRoots(cmd, s), gcDockerImages(cmd, s))
		},
	}
}

// rootBackends are the backends that keep templates' shared roots, each
// in its state directory (a variable for the tests, which must not touch
// the host's).
var rootBackends = doctor.RootBackends()

// gcTemplateRoots removes the shared roots of templates the store no
// longer holds that the backends keep (doctor.RootBackends), under the
// store's lock, keeping any a box still runs on.
func gcTemplateRoots(cmd *cobra.Command, s *template.Store) error {
	var errs []error
	for _, b := range rootBackends {
		errs = append(errs, gcRoots(cmd, s, b.Name, func(keep func(string) bool) ([]string, error) { return b.Remove(b.State, keep) }))
	}
	return errors.Join(errs...)
}

// gcRoots removes one backend's roots of removed templates with remove,
// under the store's lock, and says how many went.
func gcRoots(cmd *cobra.Command, s *template.Store, backend string, remove func(keep func(string) bool) ([]string, error)) error {
	var removed []string
	err := s.Collect(func(stored func(string) bool) error {
		var err error
		removed, err = remove(stored)
		return err
	})
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if len(removed) > 0 {
		if _, werr := fmt.Fprintf(cmd.OutOrStdout(), "removed %d %s roots of removed templates\n", len(removed), backend); werr != nil {
			return werr
		}
	}
	if err != nil {
		return fmt.Errorf("removing %s roots of removed templates: %w", backend, err)
	}
	return nil
}

// dockerGCTimeout bounds gc's talk with the Docker engine, which runs
// under the store's lock: a hung engine must not hold every pull and
// import of the store (a variable for the tests).
var dockerGCTimeout = 2 * time.Minute

// gcDockerImages removes the Docker images made from templates the store
// no longer holds (docker.RemoveTemplateImages), under the store's lock,
// for at most dockerGCTimeout.
func gcDockerImages(cmd *cobra.Command, s *template.Store) error {
	var removed []string
	err := s.Collect(func(stored func(string) bool) error {
		ctx, cancel := context.WithTimeout(cmd.Context(), dockerGCTimeout)
		defer cancel()
		var err error
		removed, err = docker.RemoveTemplateImages(ctx, s.Dir(), stored)
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("the Docker engine did not answer within %v (check it with docker info, then run gc again): %w", dockerGCTimeout, err)
		}
		return err
	})
	if errors.Is(err, errors.ErrUnsupported) {
		return nil
	}
	if errors.Is(err, docker.ErrNoEngine) {
		_, werr := fmt.Fprintln(cmd.OutOrStdout(), "docker images not checked: no engine answers")
		return werr
	}
	if len(removed) > 0 {
		if _, werr := fmt.Fprintf(cmd.OutOrStdout(), "removed %d docker images of removed templates\n", len(removed)); werr != nil {
			return werr
		}
	}
	if err != nil {
		return fmt.Errorf("the layers were collected, but removing docker images: %w", err)
	}
	return nil
}

// humanBytes prints n in binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
