package wshandshake

import (
	"bufio"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"
)

// IsRequest reports whether req is a WebSocket upgrade offering wsmux.v1.
func IsRequest(req *http.Request) bool {
	return headerContains(req.Header, "Upgrade", "websocket") && headerContains(req.Header, "Sec-WebSocket-Protocol", Subprotocol)
}

// checkRequest validates a server-side upgrade request and returns its key;
// allowPOST also accepts POST.
func checkRequest(req *http.Request, allowPOST bool) (string, *HandshakeError) {
	reject := func(status int, reason string) (string, *HandshakeError) {
		return "", &HandshakeError{StatusCode: status, Reason: reason}
	}
	switch {
	case req.Method != http.MethodGet && !(allowPOST && req.Method == http.MethodPost):
		return reject(http.StatusMethodNotAllowed, "method "+req.Method+" (a WebSocket upgrade is a GET)")
	case !headerContains(req.Header, "Connection", "upgrade") || !headerContains(req.Header, "Upgrade", "websocket"):
		return reject(http.StatusBadRequest, "missing WebSocket upgrade headers (Connection: Upgrade, Upgrade: websocket)")
	case req.Header.Get("Sec-WebSocket-Version") != "13":
		return reject(http.StatusUpgradeRequired, "Sec-WebSocket-Version must be 13")
	case !headerContains(req.Header, "Sec-WebSocket-Protocol", Subprotocol):
		return reject(http.StatusBadRequest, "client did not offer WebSocket subprotocol "+Subprotocol)
	}
	key := req.Header.Get("Sec-WebSocket-Key")
	if b, err := base64.StdEncoding.DecodeString(key); err != nil || len(b) != 16 {
		return reject(http.StatusBadRequest, "bad Sec-WebSocket-Key")
	}
	return key, nil
}

// Upgrade answers a WebSocket upgrade request (a GET offering wsmux.v1) on
// a net/http server: it hijacks w and writes the 101 selecting Subprotocol,
// with every header of respHeader (may be nil) but the handshake's own. A
// bad request is answered with a plain-text HTTP error (400 without the
// upgrade headers or the subprotocol, 405 for another method, 426 for
// another WebSocket version) and returned as a *HandshakeError with that
// status, as is a ResponseWriter that cannot be hijacked (500).
//
// On success it returns the hijacked connection and its buffered reader,
// which may hold bytes the client sent past the handshake. The request must
// not be used afterwards.
func Upgrade(w http.ResponseWriter, r *http.Request, respHeader http.Header) (net.Conn, *bufio.Reader, error) {
	return upgrade(w, r, respHeader, false)
}

// UpgradeAcceptingPOST is Upgrade that also accepts POST upgrades, for
// clients that kept kubectl's SPDY method (the Kubernetes adapter's
// ResponseUpgrader).
func UpgradeAcceptingPOST(w http.ResponseWriter, r *http.Request, respHeader http.Header) (net.Conn, *bufio.Reader, error) {
	return upgrade(w, r, respHeader, true)
}

func upgrade(w http.ResponseWriter, r *http.Request, respHeader http.Header, allowPOST bool) (net.Conn, *bufio.Reader, error) {
	key, herr := checkRequest(r, allowPOST)
	if herr != nil {
		if herr.StatusCode == http.StatusUpgradeRequired {
			w.Header().Set("Sec-WebSocket-Version", "13")
		}
		http.Error(w, herr.Reason, herr.StatusCode)
		return nil, nil, herr
	}
	extra := respHeader.Clone()
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		reason := "cannot hijack the connection: " + err.Error()
		http.Error(w, "unable to upgrade: "+reason, http.StatusInternalServerError)
		return nil, nil, &HandshakeError{StatusCode: http.StatusInternalServerError, Reason: reason}
	}
	var b strings.Builder
	b.WriteString("HTTP/1.1 101 Switching Protocols\r\n")
	b.WriteString("Upgrade: websocket\r\nConnection: Upgrade\r\n")
	b.WriteString("Sec-WebSocket-Accept: " + AcceptKey(key) + "\r\n")
	b.WriteString("Sec-WebSocket-Protocol: " + Subprotocol + "\r\n")
	for _, k := range []string{"Upgrade", "Connection", "Sec-Websocket-Accept", "Sec-Websocket-Protocol", "Sec-Websocket-Extensions", "Content-Length", "Transfer-Encoding", "Content-Type"} {
		extra.Del(k)
	}
	for k, vs := range extra {
		for _, v := range vs {
			if strings.ContainsAny(k+v, "\r\n") {
				continue
			}
			b.WriteString(k + ": " + v + "\r\n")
		}
	}
	b.WriteString("\r\n")
	_ = conn.SetWriteDeadline(time.Now().Add(DefaultHandshakeTimeout))
	_, werr := rw.Writer.WriteString(b.String())
	if werr == nil {
		werr = rw.Writer.Flush()
	}
	if werr != nil {
		_ = conn.Close()
		return nil, nil, fmt.Errorf("wshandshake: writing the 101: %w", werr)
	}
	_ = conn.SetWriteDeadline(time.Time{})
	return conn, rw.Reader, nil
}
