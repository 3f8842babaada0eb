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
