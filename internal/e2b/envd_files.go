package e2b

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/warden-sandbox/warden/internal/workspace"
)

// Bounds of /files.
const (
	// maxUploadBytes bounds one upload request, both as sent and after
	// gzip, over all its files: the workspace's own bound of one file
	// (workspace.DefaultMaxFileBytes, which Warden's own upload limit
	// DefaultMaxUploadBytes matches), so a gzip bomb or a many-file body
	// costs at most what one large file does.
	maxUploadBytes = workspace.DefaultMaxFileBytes
	// maxUploadFiles bounds the files of one multipart upload.
	maxUploadFiles = 1000
	// transferTimeout bounds one upload's or download's time on the
	// connection, so a stalled client frees its handler and files.
	transferTimeout = 10 * time.Minute
	// maxTransfersPerSandbox bounds a sandbox's uploads and downloads at
	// once, as Warden's own file API does (server.MaxTransfersPerSession).
	maxTransfersPerSandbox = 4
	// maxTransferWaiters and transferWait bound the requests waiting for
	// one of those and how long each waits.
	maxTransferWaiters = 16
	transferWait       = 30 * time.Second
	// metadataHeader prefixes the headers that ask envd to keep user
	// metadata in extended attributes, which Warden does not do.
	metadataHeader = "X-Metadata-"
)

// fileRoutes serves envd's file transfer on the envd mux: GET /files
// downloads one file, POST /files uploads one (application/octet-stream,
// the path in the query) or several (multipart/form-data, each part's
// file name its full path), gzip-encoded or not.
func (s *Server) fileRoutes(mux *http.ServeMux) {
	newTransfers().routes(s, mux)
}

// transfers bounds each sandbox's uploads and downloads in flight: each
// holds a connection and a file, for a slow client up to transferTimeout,
// so a sandbox has maxTransfersPerSandbox at once. More wait for a slot
// (the SDK writes files with gzip as parallel requests, as many as its
// ten connections), up to maxTransferWaiters for transferWait each;
// past either a request is 429.
type transfers struct {
	mu    sync.Mutex
	boxes map[string]*transferSlots
}

// transferSlots are one sandbox's: a token per transfer in flight, and
// how many requests hold or wait for one.
type transferSlots struct {
	tokens chan struct{}
	users  int
}

func newTransfers() *transfers { return &transfers{boxes: map[string]*transferSlots{}} }

// routes serves /files on mux, each request a transfer of t.
func (t *transfers) routes(s *Server, mux *http.ServeMux) {
	mux.HandleFunc("GET /files", t.bounded(s, s.downloadFile))
	mux.HandleFunc("POST /files", t.bounded(s, s.uploadFiles))
}

// bounded runs h as one of the routed sandbox's transfers, counted too
// among its session's transfers through Warden's own file API where s is
// told how (Config.StartTransfer): a transfer that finds those full is
// refused as one past this sandbox's own waiters is.
func (t *transfers) bounded(s *Server, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		id := sandboxFrom(r.Context()).ID
		release, err := t.acquire(r.Context(), id)
		if err != nil {
			writeError(w, http.StatusTooManyRequests, "%v", err)
			return
		}
		defer release()
		if start := s.cfg.StartTransfer; start != nil {
			done, err := start(id)
			if err != nil {
				writeError(w, http.StatusTooManyRequests, "%v (counting Warden's own file API's)", err)
				return
			}
			defer done()
		}
		h(w, r)
	}
}

// acquire takes a transfer slot of sandbox id, waiting up to transferWait
// behind at most maxTransferWaiters others; release gives it back.
func (t *transfers) acquire(ctx context.Context, id string) (release func(), err error) {
	t.mu.Lock()
	b := t.boxes[id]
	if b == nil {
		b = &transferSlots{tokens: make(chan struct{}, maxTransfersPerSandbox)}
		t.boxes[id] = b
	}
	if b.users >= maxTransfersPerSandbox+maxTransferWaiters {
		t.mu.Unlock()
		return nil, fmt.Errorf("too many file transfers in this sandbox at once (%d, and %d waiting); retry when one has finished", maxTransfersPerSandbox, maxTransferWaiters)
	}
	b.users++
	t.mu.Unlock()
	leave := func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if b.users--; b.users == 0 {
			delete(t.boxes, id)
		}
	}
	wait := time.NewTimer(transferWait)
	defer wait.Stop()
	select {
	case b.tokens <- struct{}{}:
		return func() { <-b.tokens; leave() }, nil
	case <-ctx.Done():
		leave()
		return nil, fmt.Errorf("gave up waiting for a file transfer slot: %w", ctx.Err())
	case <-wait.C:
		leave()
		return nil, fmt.Errorf("waited %v for one of this sandbox's %d file transfers to finish; retry later", transferWait, maxTransfersPerSandbox)
	}
}

// filesAt opens the request's sandbox's workspace for /files and maps the
// path, after checking the username query parameter.
func (s *Server) filesAt(r *http.Request, p string) (workspace.Files, string, error) {
	if err := checkUser(r.URL.Query().Get("username")); err != nil {
		return nil, "", err
	}
	sb := sandboxFrom(r.Context())
	dir, err := s.cfg.Sessions.Files(r.Context(), sb.Owner, sb.ID)
	if err != nil {
		return nil, "", err
	}
	if p == "" {
		return dir, "", nil
	}
	wp, err := workspacePath(p)
	return dir, wp, err
}

// fileError answers err as E2B's {code, message}. What is not the
// client's doing is logged and answered without detail, since it may name
// host paths.
func (s *Server) fileError(w http.ResponseWriter, err error) {
	status := fsStatus(err)
	if status == http.StatusInternalServerError {
		s.log.Error("e2b: files request failed", "err", err)
		writeError(w, status, "internal error: see the Warden server's log")
		return
	}
	writeError(w, status, "%s", oneLine(err.Error()))
}

// downloadFile sends a regular file's bytes: exactly the size the
// workspace checked, gzip-encoded when the client accepts it (as envd).
// Links, directories, FIFOs, devices and hard links are refused by
// workspace.Dir.Read, which never opens them.
func (s *Server) downloadFile(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Query().Get("path")
	if p == "" {
		s.fileError(w, kindErrorf(workspace.ErrBadPath, "missing query parameter path: name the file to download"))
		return
	}
	dir, wp, err := s.filesAt(r, p)
	if err != nil {
		s.fileError(w, err)
		return
	}
	gz, err := acceptsGzip(r.Header.Get("Accept-Encoding"))
	if err != nil {
		writeError(w, http.StatusNotAcceptable, "%s", err)
		return
	}
	rc, e, err := dir.Read(wp)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer closeLogged(rc, "a downloaded file")
	s.transferDeadline(w)
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": e.Name}))
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Vary", "Accept-Encoding")
	if !gz {
		h.Set("Content-Length", strconv.FormatInt(e.Size, 10))
		if _, err := io.CopyN(w, rc, e.Size); err != nil {
			s.log.Debug("e2b: download cut short", "path", p, "err", err)
		}
		return
	}
	h.Set("Content-Encoding", "gzip")
	// The fastest level: Node's fetch asks for gzip on every read, and
	// the box chooses what is read. Measured through warden serve (median
	// of 5, both levels in one run): 64 MiB of random bytes 2.13 s at the
	// default level, 0.39 s at BestSpeed; 33 MiB of text 0.54 s against
	// 0.08 s, for 230 KB sent instead of 99 KB.
	zw, err := gzip.NewWriterLevel(w, gzip.BestSpeed)
	if err != nil {
		s.log.Error("e2b: download", "err", err)
		return
	}
	if _, err := io.CopyN(zw, rc, e.Size); err != nil {
		s.log.Debug("e2b: download cut short", "path", p, "err", err)
	}
	if err := zw.Close(); err != nil {
		s.log.Debug("e2b: download cut short", "path", p, "err", err)
	}
}

// transferDeadline bounds the transfer's time on the connection; a
// writer that cannot take deadlines keeps the server's own timeouts.
func (s *Server) transferDeadline(w http.ResponseWriter) {
	rc := http.NewResponseController(w)
	at := time.Now().Add(transferTimeout)
	for _, set := range []func(time.Time) error{rc.SetReadDeadline, rc.SetWriteDeadline} {
		if err := set(at); err != nil && !errors.Is(err, http.ErrNotSupported) {
			s.log.Debug("e2b: setting a transfer deadline", "err", err)
		}
	}
}

// acceptsGzip reports whether Accept-Encoding prefers gzip to identity
// (RFC 9110: identity is acceptable unless refused with q=0), and fails
// when neither is acceptable.
func acceptsGzip(header string) (bool, error) {
	q := map[string]float64{}
	for part := range strings.SplitSeq(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		weight := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				weight = f
			}
		}
		if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
			q[name] = weight
		}
	}
	weight := func(name string) float64 {
		if w, ok := q[name]; ok {
			return w
		}
		if w, ok := q["*"]; ok {
			return w
		}
		if name == "identity" {
			return 0.001 // acceptable unless refused
		}
		return 0
	}
	gz, id := weight("gzip"), weight("identity")
	if gz <= 0 && id <= 0 {
		return false, fmt.Errorf("Accept-Encoding %q accepts neither gzip nor identity, the encodings Warden serves", oneLine(header))
	}
	return gz > 0 && gz >= id, nil
}

// uploadedFile is envd's answer for each file written.
type uploadedFile struct {
	Path string `json:"path"`
	Name string `json:"name"`
	Type string `json:"type"`
}

// uploadFiles writes the request's file or files and answers their
// entries. Each file goes through workspace.Dir.Write (a temporary name
// renamed into place, the file's directories created, a planted link
// replaced, never followed). Files before a failing one stay written, as
// with envd.
func (s *Server) uploadFiles(w http.ResponseWriter, r *http.Request) {
	for name := range r.Header {
		if strings.HasPrefix(name, metadataHeader) {
			s.fileError(w, kindErrorf(workspace.ErrBadPath, "header %s: Warden does not keep file metadata; upload without it", oneLine(name)))
			return
		}
	}
	if r.ContentLength > maxUploadBytes {
		s.fileError(w, kindErrorf(workspace.ErrTooLarge, "the request body is %d bytes, over the %d-byte upload limit; send fewer or smaller files per request", r.ContentLength, maxUploadBytes))
		return
	}
	dir, qpath, err := s.filesAt(r, r.URL.Query().Get("path"))
	if err != nil {
		s.fileError(w, err)
		return
	}
	s.transferDeadline(w)
	body, err := uploadBody(r)
	if err != nil {
		s.fileError(w, err)
		return
	}
	defer body.Close()
	mediaType, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var done []uploadedFile
	switch {
	case mediaType == "application/octet-stream":
		done, err = uploadOne(dir, qpath, body)
	case strings.HasPrefix(mediaType, "multipart/"):
		done, err = uploadParts(dir, qpath, body, params["boundary"])
	default:
		err = kindErrorf(workspace.ErrBadPath, "Content-Type %q: send multipart/form-data or application/octet-stream", oneLine(r.Header.Get("Content-Type")))
	}
	if err != nil {
		s.fileError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewEncoder(w).Encode(done); err != nil {
		s.log.Debug("e2b: answering an upload", "err", err)
	}
}

// uploadBody is the request's content, gzip-decoded if so encoded, bounded
// at maxUploadBytes both as sent and decoded.
func uploadBody(r *http.Request) (io.ReadCloser, error) {
	raw := &capReader{r: r.Body, left: maxUploadBytes, what: "the request body"}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return io.NopCloser(raw), nil
	case "gzip":
		zr, err := gzip.NewReader(raw)
		if err != nil {
			if errors.Is(err, workspace.ErrTooLarge) {
				return nil, err
			}
			return nil, kindErrorf(workspace.ErrBadPath, "the gzip-encoded body is not gzip (%v); send it gzip-compressed or without Content-Encoding", err)
		}
		return struct {
			io.Reader
			io.Closer
		}{&capReader{r: zr, left: maxUploadBytes, what: "the decompressed body"}, zr}, nil
	default:
		return nil, kindErrorf(workspace.ErrBadPath, "Content-Encoding %q: Warden accepts gzip or none", oneLine(enc))
	}
}

// capReader reads at most left bytes of r and fails with ErrTooLarge if r
// holds more.
type capReader struct {
	r    io.Reader
	left int64
	what string
}

func (c *capReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		var probe [1]byte
		if n, err := c.r.Read(probe[:]); n == 0 {
			return 0, err
		}
		return 0, kindErrorf(workspace.ErrTooLarge, "%s is over the %d-byte upload limit; send fewer or smaller files per request", c.what, maxUploadBytes)
	}
	if int64(len(p)) > c.left {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// uploadOne writes an octet-stream body to the path in the query.
func uploadOne(dir workspace.Files, p string, body io.Reader) ([]uploadedFile, error) {
	if p == "" {
		return nil, kindErrorf(workspace.ErrBadPath, "missing query parameter path: an application/octet-stream upload names its file there")
	}
	f, err := writeFile(dir, p, body)
	if err != nil {
		return nil, err
	}
	return []uploadedFile{f}, nil
}

// uploadParts writes each "file" part of a multipart body to the path its
// file name gives (or qpath, when the query names one), skipping other
// parts, as envd does.
func uploadParts(dir workspace.Files, qpath string, body io.Reader, boundary string) ([]uploadedFile, error) {
	if boundary == "" {
		return nil, kindErrorf(workspace.ErrBadPath, "Content-Type multipart without a boundary parameter; send multipart/form-data; boundary=...")
	}
	end := &tailReader{r: body, keep: len(boundary) + 8}
	mr := multipart.NewReader(end, boundary)
	done := []uploadedFile{}
	seen := map[string]bool{}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			// Go's reader ends as quietly at a body cut short in a part's
			// headers as at the closing boundary; only the latter is a
			// whole upload.
			if !bytes.Contains(end.tail, []byte("--"+boundary+"--")) {
				return done, kindErrorf(workspace.ErrBadPath, "malformed multipart body: it ends before its closing boundary; send the whole body")
			}
			return done, nil
		}
		if err != nil {
			return done, malformed(err)
		}
		if part.FormName() != "file" {
			continue
		}
		if len(done) == maxUploadFiles {
			return done, kindErrorf(errTooMany, "more than %d files in one upload; send them in several requests", maxUploadFiles)
		}
		p, err := partPath(part, qpath)
		if err != nil {
			return done, err
		}
		if seen[p] {
			return done, kindErrorf(workspace.ErrBadPath, "two files for %q in one upload; send each path once", e2bPath(p))
		}
		seen[p] = true
		f, err := writeFile(dir, p, part)
		if err != nil {
			return done, err
		}
		done = append(done, f)
	}
}

// tailReader reads r and keeps the last keep bytes it read.
type tailReader struct {
	r    io.Reader
	keep int
	tail []byte
}

func (t *tailReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.tail = append(t.tail, p[:n]...)
	if len(t.tail) > t.keep {
		t.tail = append(t.tail[:0], t.tail[len(t.tail)-t.keep:]...)
	}
	return n, err
}

// partPath is the box path a part is written to: qpath, else the part's
// whole file name (multipart.Part.FileName keeps only its last element).
func partPath(part *multipart.Part, qpath string) (string, error) {
	if qpath != "" {
		return qpath, nil
	}
	_, params, err := mime.ParseMediaType(part.Header.Get("Content-Disposition"))
	if err != nil || params["filename"] == "" {
		return "", kindErrorf(workspace.ErrBadPath, "a file part has no file name in its Content-Disposition; give each part its path as filename")
	}
	return workspacePath(params["filename"])
}

// malformed marks an error reading the multipart framing as the
// client's: a bound it passed keeps its kind.
func malformed(err error) error {
	if errors.Is(err, workspace.ErrTooLarge) {
		return err
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return bodyError(err)
	}
	return kindErrorf(workspace.ErrBadPath, "malformed multipart body: %v; send multipart/form-data with a boundary", err)
}

// bodyError marks a write that failed on the client's content (cut
// short, not the gzip it claimed, or too slow for the server's pacing) as
// the client's.
func bodyError(err error) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		return kindErrorf(errStalled, "the upload stopped arriving or came too slowly (%v); send it again, faster", err)
	}
	var corrupt flate.CorruptInputError
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt) {
		return kindErrorf(workspace.ErrBadPath, "the upload's content is cut short or corrupt (%v); send it again", err)
	}
	return err
}

// writeFile writes r to box path p.
func writeFile(dir workspace.Files, p string, r io.Reader) (uploadedFile, error) {
	e, err := dir.Write(p, r, 0o644)
	if err != nil {
		return uploadedFile{}, bodyError(err)
	}
	bp := e2bPath(path.Join(boxHome, e.Path))
	return uploadedFile{Path: bp, Name: path.Base(bp), Type: "file"}, nil
}
