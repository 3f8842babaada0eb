//go:build !slim

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/warden-sandbox/warden/internal/interp"
	"github.com/warden-sandbox/warden/sdk"
)

// clientOptions are how the session commands reach a warden serve.
type clientOptions struct {
	server string
	key    string
}

func (o *clientOptions) client() (*sdk.Client, error) {
	var opts []sdk.Option
	key := o.key
	if key == "" {
		key = os.Getenv("WARDEN_API_KEY")
	}
	if key != "" {
		opts = append(opts, sdk.WithAPIKey(key))
	}
	return sdk.New(o.server, opts...)
}

func newSessionCmd() *cobra.Command {
	o := &clientOptions{}
	cmd := &cobra.Command{
		Use:   "session",
		Short: sessionShort,
		Long: `Talk to a running warden serve. A session is a sandbox that keeps its files
and interpreter state between execs. The server is --server (or WARDEN_URL),
the key --api-key (or WARDEN_API_KEY).`,
	}
	server := os.Getenv("WARDEN_URL")
	if server == "" {
		server = "http://127.0.0.1:8080"
	}
	cmd.PersistentFlags().StringVar(&o.server, "server", server, "URL of warden serve")
	// The key's default is read at use, not shown in --help.
	cmd.PersistentFlags().StringVar(&o.key, "api-key", "", "API key (default $WARDEN_API_KEY)")
	cmd.AddCommand(newSessionCreateCmd(o), newSessionExecCmd(o), newSessionCpCmd(o), newSessionRmCmd(o), newSessionLsCmd(o),
		newSessionPauseCmd(o), newSessionResumeCmd(o), newSessionSnapshotCmd(o), newSessionForkCmd(o))
	return cmd
}

func newSessionCreateCmd(o *clientOptions) *cobra.Command {
	var ttl, idle time.Duration
	var env []string
	var autoPause, autoSnapshot bool
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Create a session and print its id",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			req := &sdk.SessionCreate{TTLSeconds: ttl.Seconds(), IdleTimeoutSeconds: idle.Seconds(), AutoPause: autoPause, AutoSnapshot: autoSnapshot}
			if req.Env, err = envMap(env); err != nil {
				return err
			}
			s, err := c.NewSession(cmd.Context(), req)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), s.ID())
			return nil
		},
	}
	cmd.Flags().DurationVar(&ttl, "ttl", 0, "session lifetime (server default if unset)")
	cmd.Flags().DurationVar(&idle, "idle-timeout", 0, "end the session after this long unused")
	cmd.Flags().StringArrayVar(&env, "env", nil, "KEY=VALUE for every exec (repeatable)")
	cmd.Flags().BoolVar(&autoPause, "auto-pause", false, "pause the session at its idle timeout instead of ending it")
	cmd.Flags().BoolVar(&autoSnapshot, "auto-snapshot", false, "snapshot the session to disk at its idle timeout instead of ending it (files; memory too on gvisor over the stream transport)")
	return cmd
}

func newSessionPauseCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "pause ID...",
		Short: "Pause sessions: their processes stop, memory kept, until resumed or the next exec",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachSession(cmd.Context(), o, args, func(ctx context.Context, s *sdk.Session) error {
				_, err := s.Pause(ctx)
				return err
			})
		},
	}
}

func newSessionResumeCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "resume ID...",
		Short: "Resume paused sessions where they stopped, or snapshotted ones in a fresh sandbox with their files",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return eachSession(cmd.Context(), o, args, func(ctx context.Context, s *sdk.Session) error {
				_, err := s.Resume(ctx)
				return err
			})
		},
	}
}

func newSessionSnapshotCmd(o *clientOptions) *cobra.Command {
	var filesOnly bool
	cmd := &cobra.Command{
		Use:   "snapshot ID...",
		Short: "Snapshot sessions to disk: files kept, sandbox closed, until resumed or the next exec (processes start fresh, except on gvisor over its default stream transport, which keeps memory too unless --files-only)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			memory := !filesOnly
			return eachSession(cmd.Context(), o, args, func(ctx context.Context, s *sdk.Session) error {
				_, err := s.SnapshotWith(ctx, sdk.SnapshotRequest{Memory: &memory})
				return err
			})
		},
	}
	cmd.Flags().BoolVar(&filesOnly, "files-only", false, "keep files only, never the sandbox's memory (nothing its processes hold in memory reaches the server's disk)")
	return cmd
}

func newSessionForkCmd(o *clientOptions) *cobra.Command {
	var count int
	var filesOnly bool
	cmd := &cobra.Command{
		Use:   "fork ID",
		Short: "Make new sessions from a session and print their ids (files copied; memory too on gvisor over its default stream transport unless --files-only)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			memory := !filesOnly
			forks, err := c.Session(args[0]).ForkWith(cmd.Context(), sdk.ForkRequest{Count: count, Memory: &memory})
			if err != nil {
				return err
			}
			for _, f := range forks {
				fmt.Fprintln(cmd.OutOrStdout(), f.ID())
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&count, "count", 1, "how many sessions to make (1 to 16)")
	cmd.Flags().BoolVar(&filesOnly, "files-only", false, "copy files only, never the session's memory (the copies start fresh processes and share nothing it held in memory)")
	return cmd
}

// eachSession does fn to each session of ids, all of them whatever fails,
// and joins the failures.
func eachSession(ctx context.Context, o *clientOptions, ids []string, fn func(context.Context, *sdk.Session) error) error {
	c, err := o.client()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, fn(ctx, c.Session(id)))
	}
	return errors.Join(errs...)
}

func newSessionExecCmd(o *clientOptions) *cobra.Command {
	var language, code string
	var timeout time.Duration
	var asJSON, interactive bool
	cmd := &cobra.Command{
		Use:   "exec ID [--language L --code CODE | [-i] -- COMMAND [ARGS...]]",
		Short: "Run a command, or code in the session's interpreter, streaming its output",
		Long: `Run a command in a session, or code in its persistent interpreter (` + strings.Join(interp.Languages(), ", ") + `;
--code - reads the code from stdin). Output streams as it
happens; the exit code is the command's (1 when code raised an exception).
-i passes this command's stdin to the command (up to 4 MiB). With --json,
print the Result.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := execRequest(args[1:], language, code, timeout)
			if err != nil {
				return err
			}
			if interactive {
				if req.Stdin, err = readStdin(len(req.Command) > 0); err != nil {
					return err
				}
			}
			c, err := o.client()
			if err != nil {
				return err
			}
			return sessionExec(cmd.Context(), c.Session(args[0]), req, asJSON)
		},
	}
	cmd.Flags().StringVar(&language, "language", "", "interpreter for --code: "+strings.Join(interp.Languages(), ", "))
	cmd.Flags().StringVar(&code, "code", "", "code to run (- reads stdin)")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "timeout of this exec (session default if unset)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the Result as JSON instead of streaming")
	cmd.Flags().BoolVarP(&interactive, "interactive", "i", false, "pass stdin to the command")
	return cmd
}

// maxStdin is the API's bound on an exec's stdin.
const maxStdin = 4 << 20

// readStdin reads this process's stdin for a command's, within the API's
// bound; code has no stdin.
func readStdin(isCommand bool) (string, error) {
	if !isCommand {
		return "", errors.New("-i passes stdin to a command; code reads none (use --code - to send the code itself)")
	}
	b, err := io.ReadAll(io.LimitReader(os.Stdin, maxStdin+1))
	if err != nil {
		return "", fmt.Errorf("reading stdin: %w", err)
	}
	if len(b) > maxStdin {
		return "", fmt.Errorf("stdin is larger than %d MiB, the API's limit: copy the data in with warden session cp", maxStdin>>20)
	}
	return string(b), nil
}

func execRequest(command []string, language, code string, timeout time.Duration) (sdk.ExecRequest, error) {
	req := sdk.ExecRequest{Command: command, TimeoutSeconds: timeout.Seconds()}
	switch {
	case language == "" && code == "" && len(command) == 0:
		return req, errors.New("nothing to run: give -- COMMAND, or --language and --code")
	case (language == "") != (code == ""):
		return req, errors.New("--language and --code go together")
	case language != "" && len(command) > 0:
		return req, errors.New("give either a command or --language/--code, not both")
	case code == "-":
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return req, fmt.Errorf("reading code from stdin: %w", err)
		}
		code = string(b)
	}
	req.Language, req.Code = sdk.Language(language), code
	return req, nil
}

// sessionExec streams an exec's output and exits with its code.
func sessionExec(ctx context.Context, s *sdk.Session, req sdk.ExecRequest, asJSON bool) error {
	if asJSON {
		r, err := s.Exec(ctx, req)
		if err != nil {
			return err
		}
		return json.NewEncoder(os.Stdout).Encode(r)
	}
	r, err := s.Stream(ctx, req, func(e sdk.Event) error {
		switch e.Type {
		case "stdout":
			// A reader of ours gone away (| head) cannot be told; the
			// session's result is still read to its end.
			_, _ = io.WriteString(os.Stdout, e.Data)
		case "stderr":
			_, _ = io.WriteString(os.Stderr, e.Data) // a reader gone away cannot be told
		}
		return nil
	})
	if err != nil {
		return err
	}
	printRich(r)
	if r.TimedOut {
		fmt.Fprintln(os.Stderr, "warden: exec timed out")
		return exitError{exitTimeout}
	}
	if r.ExitCode != 0 {
		return exitError{r.ExitCode}
	}
	if r.Exception != nil {
		return exitError{1}
	}
	return nil
}

// printRich shows what a terminal can of an interpreter's result: the
// value, the exception, and one line per rich output.
func printRich(r *sdk.Result) {
	if r.Value != "" {
		fmt.Println(r.Value)
	}
	if r.Exception != nil {
		fmt.Fprint(os.Stderr, r.Exception.Traceback)
	}
	for i, out := range r.Outputs {
		fmt.Fprintf(os.Stderr, "warden: output %d: %s (%d bytes; use --json to get it)\n", i+1, out.MimeType, len(out.Data))
	}
}

func newSessionCpCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy a file into or out of a session: ID:PATH names a session's file, - is stdin/stdout",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			return sessionCopy(cmd.Context(), c, args[0], args[1])
		},
	}
}

func sessionCopy(ctx context.Context, c *sdk.Client, src, dst string) error {
	srcID, srcPath, srcRemote := strings.Cut(src, ":")
	dstID, dstPath, dstRemote := strings.Cut(dst, ":")
	switch {
	case srcRemote && !dstRemote:
		b, err := c.Session(srcID).ReadFile(ctx, srcPath)
		if err != nil {
			return err
		}
		if dst == "-" {
			_, err = os.Stdout.Write(b)
			return err
		}
		return os.WriteFile(dst, b, 0o644)
	case dstRemote && !srcRemote:
		var r io.Reader = os.Stdin
		var mode os.FileMode
		if src != "-" {
			b, err := os.ReadFile(src)
			if err != nil {
				return err
			}
			if fi, err := os.Stat(src); err == nil {
				mode = fi.Mode().Perm()
			}
			r = bytes.NewReader(b)
		}
		_, err := c.Session(dstID).WriteFile(ctx, dstPath, r, mode)
		return err
	}
	return errors.New("exactly one of SRC and DST must be ID:PATH in a session")
}

func newSessionRmCmd(o *clientOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "rm ID...",
		Short: "End sessions and remove every trace of them",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			var errs []error
			for _, id := range args {
				errs = append(errs, c.Session(id).Close(cmd.Context()))
			}
			return errors.Join(errs...)
		},
	}
}

func newSessionLsCmd(o *clientOptions) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List your sessions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := o.client()
			if err != nil {
				return err
			}
			list, err := c.Sessions(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				return json.NewEncoder(cmd.OutOrStdout()).Encode(list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tSTATE\tEXECS\tCREATED\tEXPIRES")
			for _, s := range list {
				fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.ID, s.State, s.Execs, s.CreatedAt.Format(time.RFC3339), s.ExpiresAt.Format(time.RFC3339))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

// envMap turns KEY=VALUE flags into the API's map.
func envMap(env []string) (map[string]string, error) {
	if len(env) == 0 {
		return nil, nil
	}
	m := make(map[string]string, len(env))
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--env %q is not KEY=VALUE", kv)
		}
		m[k] = v
	}
	return m, nil
}
