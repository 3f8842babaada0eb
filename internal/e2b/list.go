package e2b

import (
	"encoding/base64"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Paging of GET /v2/sandboxes, as E2B's spec says.
const (
	defaultPageLimit = 100
	maxPageLimit     = 100
	headerNextToken  = "X-Next-Token"
	headerTotal      = "X-Total-Running"
)

// listQuery is what GET /v2/sandboxes filters and pages by.
type listQuery struct {
	metadata     map[string]string
	states       map[string]bool // the states asked for (default: running and paused)
	asc          bool
	startedAfter time.Time
	template     string
	limit        int
	after        *cursor
}

// cursor is where a page ends: the last sandbox's start time and id,
// which together order every sandbox.
type cursor struct {
	started time.Time
	id      string
}

// listSandboxes answers GET /v2/sandboxes: the caller's running
// sandboxes, filtered, ordered by start time and paged with X-Next-Token.
func (s *Server) listSandboxes(w http.ResponseWriter, r *http.Request, owner string) {
	q, err := parseListQuery(r.URL.Query())
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	all := s.runningOf(owner)
	running := 0
	for _, l := range all {
		if l.State == stateRunning {
			running++
		}
	}
	w.Header().Set(headerTotal, strconv.Itoa(running))
	page := q.filter(all)
	if len(page) > q.limit {
		last := page[q.limit-1]
		w.Header().Set(headerNextToken, encodeCursor(cursor{last.StartedAt, last.SandboxID}))
		page = page[:q.limit]
	}
	if page == nil {
		page = []listedJSON{}
	}
	writeJSON(w, http.StatusOK, page)
}

// listSandboxesV1 answers the deprecated GET /sandboxes: every running or
// paused sandbox of the caller (its state says which), filtered by
// metadata only, oldest first.
func (s *Server) listSandboxesV1(w http.ResponseWriter, r *http.Request, owner string) {
	md, err := parseMetadataQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		s.writeControlError(w, err)
		return
	}
	out := []listedJSON{}
	for _, l := range s.runningOf(owner) {
		if hasMetadata(l.Metadata, md) {
			out = append(out, l)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// runningOf is owner's running and paused sandboxes as E2B lists them,
// oldest first.
func (s *Server) runningOf(owner string) []listedJSON {
	var out []listedJSON
	for _, l := range s.sandboxes.owned(owner) {
		if alive(l.info) {
			out = append(out, toListedJSON(l.sb, l.info))
		}
	}
	sortListed(out, true)
	return out
}

// sortListed orders sandboxes by start time, then id, which together
// order every sandbox, so pages never skip or repeat one.
func sortListed(all []listedJSON, asc bool) {
	slices.SortFunc(all, func(a, b listedJSON) int {
		return compareListed(a.StartedAt, a.SandboxID, b.StartedAt, b.SandboxID, asc)
	})
}

// compareListed compares two positions in a list's order.
func compareListed(at time.Time, aid string, bt time.Time, bid string, asc bool) int {
	c := at.Compare(bt)
	if c == 0 {
		c = strings.Compare(aid, bid)
	}
	if !asc {
		c = -c
	}
	return c
}

// filter keeps what q asks for, in q's order, after q's cursor; one more
// than a page, so the caller knows whether another page follows.
func (q *listQuery) filter(all []listedJSON) []listedJSON {
	sortListed(all, q.asc)
	var out []listedJSON
	for _, l := range all {
		if len(out) > q.limit {
			break
		}
		if q.keeps(l) {
			out = append(out, l)
		}
	}
	return out
}

// keeps says whether l passes q's filters and comes after its cursor.
func (q *listQuery) keeps(l listedJSON) bool {
	switch {
	case !q.states[l.State]:
		return false
	case q.template != "" && l.TemplateID != q.template:
		return false
	case !q.startedAfter.IsZero() && l.StartedAt.Before(q.startedAfter):
		return false
	case !hasMetadata(l.Metadata, q.metadata):
		return false
	case q.after == nil:
		return true
	}
	return compareListed(l.StartedAt, l.SandboxID, q.after.started, q.after.id, q.asc) > 0
}

// hasMetadata says whether md holds every pair of want.
func hasMetadata(md, want map[string]string) bool {
	for k, v := range want {
		if got, ok := md[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// parseListQuery reads GET /v2/sandboxes's query, refusing what it
// cannot read by name.
func parseListQuery(v url.Values) (*listQuery, error) {
	q := &listQuery{limit: defaultPageLimit}
	var err error
	if q.metadata, err = parseMetadataQuery(v.Get("metadata")); err != nil {
		return nil, err
	}
	if q.states, err = parseStates(v["state"]); err != nil {
		return nil, err
	}
	switch o := v.Get("order"); o {
	case "", "desc":
	case "asc":
		q.asc = true
	default:
		return nil, badRequest("order: %q is not asc or desc", o)
	}
	if t := v.Get("startedAfter"); t != "" {
		if q.startedAfter, err = time.Parse(time.RFC3339Nano, t); err != nil {
			return nil, badRequest("startedAfter: %q is not an RFC 3339 time such as 2026-01-02T15:04:05Z", t)
		}
	}
	q.template = v.Get("template")
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > maxPageLimit {
			return nil, badRequest("limit: %q is out of range: give 1 to %d", l, maxPageLimit)
		}
		q.limit = n
	}
	if t := v.Get("nextToken"); t != "" {
		c, err := decodeCursor(t)
		if err != nil {
			return nil, err
		}
		q.after = &c
	}
	return q, nil
}

// parseStates reads the state filter (comma-separated, or repeated): the
// states asked for, running and paused when there is none, as E2B's SDK
// documents Sandbox.list (it sends no state unless asked).
func parseStates(values []string) (map[string]bool, error) {
	if len(values) == 0 {
		return map[string]bool{stateRunning: true, statePaused: true}, nil
	}
	states := map[string]bool{}
	for _, v := range values {
		for _, st := range strings.Split(v, ",") {
			if st != stateRunning && st != statePaused {
				return nil, badRequest("state: %q is not running or paused", st)
			}
			states[st] = true
		}
	}
	return states, nil
}

// parseMetadataQuery reads the metadata filter: a query string
// ("user=abc&app=prod") whose keys and values are URL-encoded once more,
// as E2B's SDKs send it.
func parseMetadataQuery(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	pairs, err := url.ParseQuery(raw)
	if err != nil {
		return nil, badRequest("metadata: %q is not key=value pairs joined by &: %v", raw, err)
	}
	out := make(map[string]string, len(pairs))
	for k, vs := range pairs {
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, badRequest("metadata: key %q is not URL-encoded", k)
		}
		val, err := url.QueryUnescape(vs[len(vs)-1])
		if err != nil {
			return nil, badRequest("metadata: value of %q is not URL-encoded", key)
		}
		out[key] = val
	}
	return out, nil
}

// encodeCursor is a page's X-Next-Token.
func encodeCursor(c cursor) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.started.UnixNano(), 10) + "." + c.id))
}

// decodeCursor reads a nextToken encodeCursor made.
func decodeCursor(tok string) (cursor, error) {
	bad := badRequest("nextToken: %q is not a token this server gave: send the X-Next-Token of the previous page, or none for the first", tok)
	raw, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return cursor{}, bad
	}
	ns, id, ok := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(ns, 10, 64)
	if !ok || err != nil || id == "" {
		return cursor{}, bad
	}
	return cursor{time.Unix(0, n).UTC(), id}, nil
}
