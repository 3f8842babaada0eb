package egress

import (
	"bufio"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
)

// hopHeaders apply to one connection and are never passed on (RFC 9110
// 7.6.1); Proxy-* headers are dropped as well, so credentials meant for a
// proxy never reach an origin.
var hopHeaders = []string{"Connection", "Keep-Alive", "Te", "Trailer", "Transfer-Encoding", "Upgrade"}

// forward sends one plain-HTTP request to the origin in origin form and
// copies the response back, then the connection closes (Connection:
// close both ways): one request per connection keeps every request a
// separate decision. Redirects are passed back like any answer, never
// followed. It returns a note for the audit when the exchange failed.
func (x *exchange) forward(req *http.Request, up net.Conn, m *meters) string {
	if strings.EqualFold(req.Header.Get("Expect"), "100-continue") {
		// The client waits for this before sending its body; the origin
		// gets the whole request at once.
		_, _ = io.WriteString(x.c, "HTTP/1.1 100 Continue\r\n\r\n") // a client gone shows in the read of its body
	}
	req.Header.Del("Expect")
	stripHop(req.Header)
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header["User-Agent"] = []string{""} // keep Go from adding its own
	}
	req.RequestURI, req.Host, req.Close = "", req.URL.Host, true

	bw := bufio.NewWriterSize(&meterWriter{a: x.a, w: up, n: &m.up}, 32<<10)
	werr := req.Write(bw)
	if werr == nil {
		werr = bw.Flush()
	}
	if errors.Is(werr, errByteLimit) {
		x.replyError(http.StatusForbidden, "byte limit reached")
		return "closed at the byte limit"
	}
	// An origin may answer (413, 401, ...) without reading the whole
	// body; a failed write is only fatal when no response follows.
	lr := &io.LimitedReader{R: &meterReader{a: x.a, r: up, n: &m.down}, N: maxHeaderBytes}
	rbr := bufio.NewReaderSize(lr, 32<<10)
	var resp *http.Response
	var err error
	for {
		resp, err = http.ReadResponse(rbr, req)
		if err != nil || resp.StatusCode >= 200 || resp.StatusCode == http.StatusSwitchingProtocols {
			break
		}
		// Informational answers (103 Early Hints) are dropped: the
		// client gets one final response.
	}
	if err != nil {
		if werr != nil {
			err = werr
		}
		x.replyError(http.StatusBadGateway, "no valid response from the origin: "+shortErr(err))
		return "no valid response from the origin"
	}
	lr.N = math.MaxInt64
	defer resp.Body.Close()
	stripHop(resp.Header)
	resp.Close = true
	cw := bufio.NewWriterSize(x.c, 32<<10)
	err = resp.Write(cw)
	if err == nil {
		err = cw.Flush()
	}
	switch {
	case errors.Is(err, errByteLimit):
		return "closed at the byte limit"
	case err != nil:
		return "the response was cut: " + shortErr(err)
	}
	return ""
}

// replyError answers a plain-HTTP request that was allowed but failed
// before any response reached the client.
func (x *exchange) replyError(status int, reason string) {
	line := oneLine("warden egress: " + x.ev.Host + ": " + reason)
	w := bufio.NewWriter(x.c)
	resp := &http.Response{
		StatusCode: status, ProtoMajor: 1, ProtoMinor: 1, Close: true,
		Header:        http.Header{"Content-Type": {"text/plain; charset=utf-8"}},
		ContentLength: int64(len(line) + 1),
		Body:          io.NopCloser(strings.NewReader(line + "\n")),
	}
	if resp.Write(w) == nil {
		w.Flush()
	}
}

// stripHop removes hop-by-hop headers, those the Connection header names,
// and Proxy-* headers.
func stripHop(h http.Header) {
	for _, v := range h.Values("Connection") {
		for name := range strings.SplitSeq(v, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(k, "Proxy-") {
			delete(h, k)
		}
	}
}
