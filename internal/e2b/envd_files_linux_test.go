package e2b

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// filesReply is one /files answer: the status, and the body's JSON.
type filesReply struct {
	status  int
	body    []byte
	header  http.Header
	message string
}

// do sends one /files request.
func (h *fsHarness) do(t *testing.T, method, query string, header map[string]string, body io.Reader) filesReply {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+"/files?"+query, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := h.srv.Client().Transport.RoundTrip(req) // no transparent gzip
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	r := filesReply{status: res.StatusCode, body: b, header: res.Header}
	if res.StatusCode != http.StatusOK {
		var e restError
		if err := json.Unmarshal(b, &e); err != nil || e.Code != res.StatusCode || e.Message == "" || strings.Contains(e.Message, "\n") {
			t.Errorf("%s %s: error body %q is not E2B's one-line {code, message}", method, query, b)
		}
		r.message = e.Message
	}
	return r
}

func q(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	return v.Encode()
}

func gzipped(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestFilesDownload(t *testing.T) {
	h := newFSHarness(t)
	secret, check := h.decoy(t)
	h.plant(t, map[string]string{
		"hello.txt":  "Hello, world!",
		"empty":      "",
		"d/":         "/",
		"passwd":     "->/etc/passwd",
		"evil":       "->" + secret,
		"outlink":    "->" + h.out,
		"d/note.txt": "note",
		"linked":     "two names",
	})
	if err := syscall.Mkfifo(filepath.Join(h.ws, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(h.ws, "linked"), filepath.Join(h.ws, "hardlink")); err != nil {
		t.Fatal(err)
	}
	h.give(t)
	tests := []struct {
		query  string
		header map[string]string
		status int
		want   string
		gzip   bool
	}{
		{query: q("path", "hello.txt"), status: 200, want: "Hello, world!"},
		{query: q("path", "/home/user/d/note.txt"), status: 200, want: "note"},
		{query: q("path", "/workspace/hello.txt", "username", "user"), status: 200, want: "Hello, world!"},
		{query: q("path", "empty"), status: 200, want: ""},
		{query: q("path", "hello.txt"), header: map[string]string{"Accept-Encoding": "gzip"}, status: 200, want: "Hello, world!", gzip: true},
		{query: q("path", "hello.txt"), header: map[string]string{"Accept-Encoding": "gzip;q=0, identity"}, status: 200, want: "Hello, world!"},
		{query: q("path", "hello.txt"), header: map[string]string{"Accept-Encoding": "br, identity;q=0"}, status: 406},
		{query: q("path", "missing"), status: 404},
		{query: q("path", "d"), status: 400},
		{query: q("path", "passwd"), status: 400},
		{query: q("path", "evil"), status: 400},
		{query: q("path", "outlink/secret"), status: 400},
		{query: q("path", "fifo"), status: 400},
		{query: q("path", "hardlink"), status: 400},
		{query: q("path", "/etc/passwd"), status: 400},
		{query: q("path", "../out/secret"), status: 400},
		{query: q("path", "hello.txt", "username", "root"), status: 400},
		{query: "", status: 400},
	}
	for _, tt := range tests {
		r := h.do(t, "GET", tt.query, tt.header, nil)
		what := fmt.Sprintf("GET /files?%s %v", tt.query, tt.header)
		if r.status != tt.status {
			t.Errorf("%s: status %d (%s), want %d", what, r.status, r.message, tt.status)
			continue
		}
		if bytes.Contains(r.body, []byte("root:")) || bytes.Contains(r.body, []byte("SECRET")) {
			t.Errorf("%s: answered %q, read through a planted link", what, r.body)
		}
		if r.status != 200 {
			continue
		}
		got := r.body
		if (r.header.Get("Content-Encoding") == "gzip") != tt.gzip {
			t.Errorf("%s: Content-Encoding %q, want gzip %v", what, r.header.Get("Content-Encoding"), tt.gzip)
		}
		if tt.gzip {
			zr, err := gzip.NewReader(bytes.NewReader(got))
			if err != nil {
				t.Fatal(err)
			}
			if got, err = io.ReadAll(zr); err != nil {
				t.Fatal(err)
			}
		}
		if string(got) != tt.want {
			t.Errorf("%s: body %q, want %q", what, got, tt.want)
		}
	}
	check()
}

// multipartBody is a multipart/form-data body with a "file" part per
// name (its file name the whole path) holding content.
func multipartBody(t *testing.T, files [][2]string) (string, []byte) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range files {
		part, err := mw.CreateFormFile("file", f[0])
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.WriteString(part, f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return mw.FormDataContentType(), buf.Bytes()
}

func TestFilesUpload(t *testing.T) {
	h := newFSHarness(t)
	secret, check := h.decoy(t)
	h.plant(t, map[string]string{"evil": "->" + secret, "outlink": "->" + h.out, "d/": "/"})
	octet := map[string]string{"Content-Type": "application/octet-stream"}
	octetGz := map[string]string{"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"}
	mpType, mp := multipartBody(t, [][2]string{{"multi/one.txt", "one"}, {"/home/user/two.txt", "two"}, {"/workspace/deep/three.txt", "three"}})
	mpLinkType, mpLink := multipartBody(t, [][2]string{{"ok.txt", "ok"}, {"outlink/planted", "pwned"}})
	mpDupType, mpDup := multipartBody(t, [][2]string{{"dup.txt", "a"}, {"/home/user/dup.txt", "b"}})
	mpOutsideType, mpOutside := multipartBody(t, [][2]string{{"/etc/planted", "pwned"}})
	tests := []struct {
		name   string
		query  string
		header map[string]string
		body   []byte
		status int
		want   map[string]string // files (under the workspace) and their content afterwards
		paths  []string          // the answer's paths
	}{
		{name: "octet-stream", query: q("path", "a/b/c.txt"), header: octet, body: []byte("abc"), status: 200,
			want: map[string]string{"a/b/c.txt": "abc"}, paths: []string{"/home/user/a/b/c.txt"}},
		{name: "octet-stream gzip", query: q("path", "/home/user/z.txt"), header: octetGz, body: gzipped(t, []byte("zipped")), status: 200,
			want: map[string]string{"z.txt": "zipped"}, paths: []string{"/home/user/z.txt"}},
		{name: "multipart, several files", query: "", header: map[string]string{"Content-Type": mpType}, body: mp, status: 200,
			want:  map[string]string{"multi/one.txt": "one", "two.txt": "two", "deep/three.txt": "three"},
			paths: []string{"/home/user/multi/one.txt", "/home/user/two.txt", "/home/user/deep/three.txt"}},
		{name: "multipart gzip", query: "", header: map[string]string{"Content-Type": mpType, "Content-Encoding": "gzip"}, body: gzipped(t, mp), status: 200,
			want: map[string]string{"multi/one.txt": "one"}},
		{name: "onto a planted link", query: q("path", "evil"), header: octet, body: []byte("replaced"), status: 200,
			want: map[string]string{"evil": "replaced"}},
		{name: "through a planted link", query: q("path", "outlink/planted"), header: octet, body: []byte("pwned"), status: 400},
		{name: "multipart through a planted link", header: map[string]string{"Content-Type": mpLinkType}, body: mpLink, status: 400,
			want: map[string]string{"ok.txt": "ok"}},
		{name: "multipart outside", header: map[string]string{"Content-Type": mpOutsideType}, body: mpOutside, status: 400},
		{name: "multipart, one path twice", header: map[string]string{"Content-Type": mpDupType}, body: mpDup, status: 400},
		{name: "outside the workspace", query: q("path", "/etc/planted"), header: octet, body: []byte("x"), status: 400},
		{name: "as root", query: q("path", "r.txt", "username", "root"), header: octet, body: []byte("x"), status: 400},
		{name: "no path", header: octet, body: []byte("x"), status: 400},
		{name: "onto a directory", query: q("path", "d"), header: octet, body: []byte("x"), status: 400},
		{name: "no content type", query: q("path", "x"), body: []byte("x"), status: 400},
		{name: "multipart without boundary", query: "", header: map[string]string{"Content-Type": "multipart/form-data"}, body: mp, status: 400},
		{name: "malformed multipart", header: map[string]string{"Content-Type": mpType}, body: mp[:len(mp)/2], status: 400},
		{name: "gzip that is not", query: q("path", "x"), header: octetGz, body: []byte("plain"), status: 400},
		{name: "corrupt gzip", query: q("path", "x"), header: octetGz, body: corruptGzip(t), status: 400},
		{name: "other encoding", query: q("path", "x"), header: map[string]string{"Content-Type": "application/octet-stream", "Content-Encoding": "br"}, body: []byte("x"), status: 400},
		{name: "metadata", query: q("path", "m"), header: map[string]string{"Content-Type": "application/octet-stream", "X-Metadata-Owner": "me"}, body: []byte("x"), status: 400},
	}
	for _, tt := range tests {
		r := h.do(t, "POST", tt.query, tt.header, bytes.NewReader(tt.body))
		if r.status != tt.status {
			t.Errorf("%s: status %d (%s), want %d", tt.name, r.status, r.message, tt.status)
			continue
		}
		for name, content := range tt.want {
			if got, err := os.ReadFile(filepath.Join(h.ws, name)); err != nil || string(got) != content {
				t.Errorf("%s: %s holds %q, %v; want %q", tt.name, name, got, err, content)
			}
		}
		if tt.paths == nil {
			continue
		}
		var got []uploadedFile
		if err := json.Unmarshal(r.body, &got); err != nil {
			t.Fatalf("%s: answer %q: %v", tt.name, r.body, err)
		}
		for i, p := range tt.paths {
			if i >= len(got) || got[i].Path != p || got[i].Name != filepath.Base(p) || got[i].Type != "file" {
				t.Errorf("%s: answer %+v, want paths %q", tt.name, got, tt.paths)
				break
			}
		}
	}
	for _, name := range []string{"x", "m", "r.txt", "dup.txt"} {
		if _, err := os.Lstat(filepath.Join(h.ws, name)); err == nil && name != "dup.txt" {
			t.Errorf("a refused upload left %s behind", name)
		}
	}
	check()
}

func corruptGzip(t *testing.T) []byte {
	b := gzipped(t, bytes.Repeat([]byte("corrupt me "), 1000))
	b[len(b)/2] ^= 0xff
	b[len(b)-6] ^= 0xff // the checksum too
	return b
}

// TestFilesUploadBounds: a body or a gzip bomb past the upload limit, and
// too many files, are refused with what the bound is, after bounded work.
func TestFilesUploadBounds(t *testing.T) {
	h := newFSHarness(t)
	octet := map[string]string{"Content-Type": "application/octet-stream"}
	huge := io.LimitReader(zeros{}, maxUploadBytes+1)
	r := h.do(t, "POST", q("path", "huge"), octet, huge)
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.message, fmt.Sprint(maxUploadBytes)) {
		t.Errorf("a body over the limit: status %d (%s), want 413 naming the limit", r.status, r.message)
	}
	// A gzip bomb: 4 times the limit once decompressed, a few hundred
	// KiB as sent.
	var bomb bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&bomb, gzip.BestCompression)
	if _, err := io.Copy(zw, io.LimitReader(zeros{}, 4*maxUploadBytes)); err != nil {
		t.Fatal(err)
	}
	zw.Close()
	r = h.do(t, "POST", q("path", "bomb"), map[string]string{"Content-Type": "application/octet-stream", "Content-Encoding": "gzip"}, &bomb)
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.message, "decompressed") {
		t.Errorf("a gzip bomb: status %d (%s), want 413 for the decompressed body", r.status, r.message)
	}
	files := make([][2]string, maxUploadFiles+1)
	for i := range files {
		files[i] = [2]string{fmt.Sprintf("many/%d", i), "x"}
	}
	mpType, mp := multipartBody(t, files)
	r = h.do(t, "POST", "", map[string]string{"Content-Type": mpType}, bytes.NewReader(mp))
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.message, fmt.Sprint(maxUploadFiles)) {
		t.Errorf("%d files in one upload: status %d (%s), want 429 naming the limit", len(files), r.status, r.message)
	}
	for _, name := range []string{"huge", "bomb"} {
		if _, err := os.Lstat(filepath.Join(h.ws, name)); err == nil {
			t.Errorf("a refused upload left %s behind", name)
		}
	}
	if ents, _ := os.ReadDir(h.ws); len(ents) != 1 {
		t.Errorf("workspace holds %d entries, want only many/ (and no temporary files)", len(ents))
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// users is how many requests hold or wait for a transfer of sandbox id.
func (h *fsHarness) users(id string) int {
	h.transfers.mu.Lock()
	defer h.transfers.mu.Unlock()
	if b := h.transfers.boxes[id]; b != nil {
		return b.users
	}
	return 0
}

// waitUsers waits, bounded, until sandbox id has n transfer users.
func (h *fsHarness) waitUsers(t *testing.T, id string, n int) {
	t.Helper()
	for try := 0; h.users(id) != n; try++ {
		if try == 2000 {
			t.Fatalf("%d transfer users, want %d", h.users(id), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestFilesTransferBound: a sandbox has at most maxTransfersPerSandbox
// transfers at once; the next ones wait for a slot (the SDK sends
// parallel uploads), at most maxTransferWaiters of them, and past those a
// request is 429 at once. Another sandbox's are not counted.
func TestFilesTransferBound(t *testing.T) {
	h := newFSHarness(t)
	type held struct {
		w    *io.PipeWriter
		done chan filesReply
	}
	var uploads []held
	for i := range maxTransfersPerSandbox {
		pr, pw := io.Pipe()
		u := held{w: pw, done: make(chan filesReply, 1)}
		go func() {
			u.done <- h.do(t, "POST", q("path", fmt.Sprintf("slow%d", i)), map[string]string{"Content-Type": "application/octet-stream"}, pr)
		}()
		if _, err := pw.Write([]byte("started")); err != nil {
			t.Fatal(err)
		}
		uploads = append(uploads, u)
	}
	h.waitUsers(t, "sbx-alice", maxTransfersPerSandbox)
	waiting := make(chan filesReply, maxTransferWaiters)
	for range maxTransferWaiters {
		go func() { waiting <- h.do(t, "GET", q("path", "slow0"), nil, nil) }()
	}
	h.waitUsers(t, "sbx-alice", maxTransfersPerSandbox+maxTransferWaiters)
	r := h.do(t, "GET", q("path", "slow0"), nil, nil)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.message, fmt.Sprint(maxTransferWaiters)) {
		t.Errorf("a transfer past the waiters: status %d (%s), want 429 naming the bound", r.status, r.message)
	}
	other := h.do(t, "GET", q("path", "slow0"), map[string]string{"X-Test-Sandbox": "sbx-bob"}, nil)
	if other.status == http.StatusTooManyRequests {
		t.Errorf("another sandbox's transfer: 429, counted against this one's")
	}
	uploads[0].w.Close()
	if r := <-uploads[0].done; r.status != 200 {
		t.Errorf("the first upload: status %d (%s)", r.status, r.message)
	}
	for range maxTransferWaiters { // each waiter in turn, in the three slots left
		if r := <-waiting; r.status != 200 || string(r.body) != "started" {
			t.Errorf("a waiting download: status %d (%s) %q, want the file", r.status, r.message, r.body)
		}
	}
	for _, u := range uploads[1:] {
		u.w.Close()
		<-u.done
	}
	h.waitUsers(t, "sbx-alice", 0)
	h.transfers.mu.Lock()
	defer h.transfers.mu.Unlock()
	if len(h.transfers.boxes) != 0 {
		t.Errorf("transfer slots kept after all ended: %v", h.transfers.boxes)
	}
}

// TestFilesInternalError: an error that is not the client's is answered
// without its detail, which may name host paths.
func TestFilesInternalError(t *testing.T) {
	h := newFSHarness(t)
	h.sess.fail = errors.New("opening /proc/4242/root/workspace: input/output error")
	r := h.do(t, "GET", q("path", "f"), nil, nil)
	if r.status != http.StatusInternalServerError || strings.Contains(r.message, "/proc") {
		t.Errorf("an internal error: status %d, message %q; want 500 without the host path", r.status, r.message)
	}
}

// TestFilesBodyErrors: an upload that failed on the client's content is
// the client's error, with the status that says which.
func TestFilesBodyErrors(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("writing %q: %w", "f", os.ErrDeadlineExceeded), http.StatusRequestTimeout},
		{fmt.Errorf("writing %q: %w", "f", io.ErrUnexpectedEOF), http.StatusBadRequest},
		{fmt.Errorf("writing %q: %w", "f", gzip.ErrChecksum), http.StatusBadRequest},
		{errors.New("disk on fire"), http.StatusInternalServerError},
	} {
		if got := fsStatus(bodyError(tt.err)); got != tt.want {
			t.Errorf("status of %v = %d, want %d", tt.err, got, tt.want)
		}
	}
	// Between parts, any error of the framing is the client's.
	for _, tt := range []struct {
		err  error
		want int
	}{
		{fmt.Errorf("multipart: NextPart: %w", os.ErrDeadlineExceeded), http.StatusRequestTimeout},
		{errors.New("multipart: NextPart: bufio: buffer full"), http.StatusBadRequest},
	} {
		if got := fsStatus(malformed(tt.err)); got != tt.want {
			t.Errorf("status of %v between parts = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// TestFilesTransferSharesSessionCount: a /files transfer is counted among
// its session's own file API transfers (Config.StartTransfer), so the two
// APIs together hold no more than one bound: with those full it is 429
// naming them, and a transfer that ran is counted out once.
func TestFilesTransferSharesSessionCount(t *testing.T) {
	h := newFSHarness(t)
	if err := os.WriteFile(filepath.Join(h.ws, "a"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	full, started, ended := false, map[string]int{}, 0
	h.svc.s.cfg.StartTransfer = func(id string) (func(), error) {
		mu.Lock()
		defer mu.Unlock()
		if full {
			return nil, errors.New("too many file transfers in this session at once (at most 4)")
		}
		started[id]++
		return func() { mu.Lock(); ended++; mu.Unlock() }, nil
	}
	if r := h.do(t, "GET", q("path", "a"), nil, nil); r.status != http.StatusOK || string(r.body) != "x" {
		t.Fatalf("download with room: status %d %q (%s), want 200 \"x\"", r.status, r.body, r.message)
	}
	mu.Lock()
	if started["sbx-alice"] != 1 || ended != 1 {
		t.Errorf("counted in %v and out %d times, want sbx-alice once each", started, ended)
	}
	full = true
	mu.Unlock()
	r := h.do(t, "GET", q("path", "a"), nil, nil)
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.message, "at most 4") || !strings.Contains(r.message, "Warden's own file API") {
		t.Errorf("download with the session's transfers full: status %d (%s), want 429 naming both", r.status, r.message)
	}
	if n := h.users("sbx-alice"); n != 0 {
		t.Errorf("a refused transfer left %d users of the sandbox's slots, want 0", n)
	}
}
