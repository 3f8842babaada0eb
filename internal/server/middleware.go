package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"runtime"
	"time"
)

// recorder remembers the status a handler answered with, for the log and
// for knowing whether a recovered panic can still be answered. Unwrap lets
// http.ResponseController reach the real writer to flush streams.
//
// It also bounds the answer's connection (see answering): every write of
// an answer moves the write deadline to the write timeout from then, and
// an answer given before the request's body was read lets the rest of the
// body be read for at most a second (answerLinger).
type recorder struct {
	http.ResponseWriter
	status  int
	body    *trackedBody // nil when the request has no body
	timeout time.Duration
	now     func() time.Time
	s       *Server
}

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
		r.answering()
	}
	r.ResponseWriter.WriteHeader(status)
}

func (r *recorder) Write(p []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
		r.answering()
	} else {
		r.renew()
	}
	return r.ResponseWriter.Write(p)
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// FlushError sends what the answer has buffered, as the first Write
// would: the server's own streams reach it through http.ResponseController.
func (r *recorder) FlushError() error {
	if r.status == 0 {
		r.status = http.StatusOK
		r.answering()
	} else {
		r.renew()
	}
	return http.NewResponseController(r.ResponseWriter).Flush()
}

// Flush is FlushError for handlers that assert http.Flusher on the writer
// itself rather than use a ResponseController, as Connect's streaming
// handlers behind a Front (E2B's envd services) do. Its error is the
// client's going away, which the handler's next write reports.
func (r *recorder) Flush() { _ = r.FlushError() }

// withLogAndRecover logs one line per request, counts it in
// warden_denied_requests_total when refused (for its tenant, known once
// authentication has run), and turns a panic in any handler into a 500,
// so one bad request never takes the daemon down. The
// log names the route's pattern, not the raw path, and never the
// Authorization header or a body.
func (s *Server) withLogAndRecover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w, timeout: s.cfg.StreamWriteTimeout, now: time.Now, s: s}
		if r.Body != nil && r.Body != http.NoBody {
			rec.body = &trackedBody{ReadCloser: r.Body}
			r.Body = rec.body
		}
		// Whatever the last answer on this connection left behind, this
		// request's writes (a 100 Continue too) get a bound of their own.
		s.setWriteDeadline(w, time.Now().Add(rec.timeout))
		info := &requestInfo{}
		r = r.WithContext(context.WithValue(r.Context(), requestInfoKey{}, info))
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler { //nolint:errorlint // a recovered panic value, compared as net/http compares it: only the sentinel itself aborts
					panic(v)
				}
				buf := make([]byte, 16<<10)
				buf = buf[:runtime.Stack(buf, false)]
				s.log.Error("handler panicked", "method", r.Method, "route", s.route(r),
					"panic", fmt.Sprint(v), "stack", string(buf))
				if rec.status == 0 {
					s.writeError(rec, &apiError{http.StatusInternalServerError, codeInternal, "internal error"})
				}
			}
			s.metrics.denied(info.owner, rec.status)
			level := slog.LevelDebug
			switch {
			case rec.status >= http.StatusInternalServerError:
				level = slog.LevelWarn
			case rec.status >= http.StatusBadRequest:
				level = slog.LevelInfo
			}
			s.log.Log(r.Context(), level, "request", "method", r.Method, "route", s.route(r),
				"status", rec.status, "duration", time.Since(start), "owner", info.owner)
		}()
		next.ServeHTTP(rec, r)
	})
}

// route is the pattern that serves r ("POST /v1/sessions/{id}/exec"), so
// logs group by route and carry no ids or file paths.
func (s *Server) route(r *http.Request) string {
	if info, ok := r.Context().Value(requestInfoKey{}).(*requestInfo); ok && info.route != "" {
		return info.route
	}
	if _, pattern := s.mux.Handler(r); pattern != "" && pattern != "/" {
		return pattern
	}
	return r.Method + " (unmatched)"
}

// requestInfo is what inner layers learn about a request that the log line
// needs: the tenant, set by authentication, and the route of a request a
// Front served (see Admit).
type requestInfo struct {
	owner string
	route string
}

type requestInfoKey struct{}
