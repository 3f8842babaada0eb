package docker

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestPauseAnswers: the engine's "already in that state" answers count as
// done only when the container's state, read back, says so; runc's
// "cannot resume a running process" is an error (the engine then still
// records the container paused while it may run).
func TestPauseAnswers(t *testing.T) {
	for _, tc := range []struct {
		name, call, answer string
		status             int
		paused, running    bool
		wantErr            bool
	}{
		{name: "pause done", call: "pause", status: 204},
		{name: "already paused, paused", call: "pause", status: 409, answer: "Container c is already paused", paused: true, running: true},
		{name: "already paused, running", call: "pause", status: 409, answer: "Container c is already paused", running: true, wantErr: true},
		{name: "pause fails", call: "pause", status: 500, answer: "timeout", wantErr: true},
		{name: "unpause done", call: "unpause", status: 204},
		{name: "not paused, running", call: "unpause", status: 500, answer: "Container c is not paused", running: true},
		{name: "not paused, paused", call: "unpause", status: 500, answer: "Container c is not paused", paused: true, running: true, wantErr: true},
		{name: "not paused, stopped", call: "unpause", status: 500, answer: "Container c is not paused", wantErr: true},
		{name: "runc running", call: "unpause", status: 500, answer: "cannot resume a running process", paused: true, running: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/containers/c/json":
					fmt.Fprintf(w, `{"State":{"Paused":%v,"Running":%v}}`, tc.paused, tc.running)
				case "/containers/c/" + tc.call:
					w.WriteHeader(tc.status)
					if tc.answer != "" {
						fmt.Fprintf(w, `{"message":%q}`, tc.answer)
					}
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			e := &Engine{hc: srv.Client(), base: srv.URL}
			call := e.Pause
			if tc.call == "unpause" {
				call = e.Unpause
			}
			err := call(context.Background(), "c")
			if (err != nil) != tc.wantErr || (err != nil && strings.Contains(err.Error(), "\n")) {
				t.Errorf("got %v, want error %v (one line)", err, tc.wantErr)
			}
		})
	}
}

// TestPauseTriesAgainAfterUnableToFreeze: runc's "unable to freeze" (a
// busy box on a loaded host, which runc thawed again) is tried again while
// the engine reports the container running and not paused, at most
// pauseTries times in all and while the request lasts; a container in
// another state is left alone. A failure after tries says how many.
func TestPauseTriesAgainAfterUnableToFreeze(t *testing.T) {
	for _, tc := range []struct {
		name            string
		fails           int // pauses answered "unable to freeze" before one is done
		cancelAt        int // the pause during which the request ends, 0 for none
		paused, running bool
		wantCalls       int
		wantErr         string // in the error, "" for none
	}{
		{name: "second try freezes", fails: 1, running: true, wantCalls: 2},
		{name: "last try freezes", fails: pauseTries - 1, running: true, wantCalls: pauseTries},
		{name: "never freezes", fails: pauseTries + 3, running: true, wantCalls: pauseTries,
			wantErr: fmt.Sprintf("pausing after %d tries: ", pauseTries)},
		{name: "request ends between tries", fails: pauseTries, cancelAt: 2, running: true, wantCalls: 2,
			wantErr: "pausing after 2 tries: "},
		{name: "request ends after the first", fails: pauseTries, cancelAt: 1, running: true, wantCalls: 1,
			wantErr: "pause"},
		{name: "stopped meanwhile", fails: 1, wantCalls: 1, wantErr: "running false, paused false"},
		{name: "paused after all", fails: 1, paused: true, running: true, wantCalls: 1, wantErr: "running true, paused true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			calls := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/containers/c/json":
					fmt.Fprintf(w, `{"State":{"Paused":%v,"Running":%v}}`, tc.paused, tc.running)
				case "/containers/c/pause":
					if calls++; calls == tc.cancelAt {
						cancel()
					}
					if calls <= tc.fails {
						w.WriteHeader(http.StatusInternalServerError)
						fmt.Fprint(w, `{"message":"Cannot pause container c: OCI runtime pause failed: unable to freeze: unknown"}`)
						return
					}
					w.WriteHeader(http.StatusNoContent)
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			e := &Engine{hc: srv.Client(), base: srv.URL}
			err := e.Pause(ctx, "c")
			gotOK := err == nil && tc.wantErr == ""
			gotErr := err != nil && tc.wantErr != "" && strings.Contains(err.Error(), tc.wantErr)
			if !gotOK && !gotErr || calls != tc.wantCalls {
				t.Errorf("Pause() = %v after %d engine pauses; want error %q (\"\" for none) after %d", err, calls, tc.wantErr, tc.wantCalls)
			}
		})
	}
}
