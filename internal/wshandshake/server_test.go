package wshandshake

import (
	"bufio"
	"go/parser"
	"go/token"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// upgradeRequest is a valid wsmux upgrade request to url.
func upgradeRequest(t *testing.T, method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	require.NoError(t, err)
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", Subprotocol)
	return req
}

func TestUpgradeRejects(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		change     func(h http.Header)
		acceptPOST bool
		wantStatus int
		wantBody   string
	}{
		{name: "valid", wantStatus: http.StatusSwitchingProtocols},
		{name: "no subprotocol offered", change: func(h http.Header) { h.Del("Sec-WebSocket-Protocol") }, wantStatus: http.StatusBadRequest, wantBody: Subprotocol},
		{name: "other subprotocols only", change: func(h http.Header) { h.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, wsmux.v2") }, wantStatus: http.StatusBadRequest, wantBody: Subprotocol},
		{name: "POST", method: http.MethodPost, wantStatus: http.StatusMethodNotAllowed},
		{name: "POST accepted", method: http.MethodPost, acceptPOST: true, wantStatus: http.StatusSwitchingProtocols},
		{name: "PUT even where POST is accepted", method: http.MethodPut, acceptPOST: true, wantStatus: http.StatusMethodNotAllowed},
		{name: "no Upgrade header", change: func(h http.Header) { h.Del("Upgrade") }, wantStatus: http.StatusBadRequest, wantBody: "upgrade headers"},
		{name: "no Connection: Upgrade", change: func(h http.Header) { h.Set("Connection", "keep-alive") }, wantStatus: http.StatusBadRequest, wantBody: "upgrade headers"},
		{name: "version 8", change: func(h http.Header) { h.Set("Sec-WebSocket-Version", "8") }, wantStatus: http.StatusUpgradeRequired},
		{name: "short key", change: func(h http.Header) { h.Set("Sec-WebSocket-Key", "c2hvcnQ=") }, wantStatus: http.StatusBadRequest, wantBody: "Sec-WebSocket-Key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errc := make(chan error, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				up := Upgrade
				if tt.acceptPOST {
					up = UpgradeAcceptingPOST
				}
				conn, _, err := up(w, r, nil)
				if err == nil {
					conn.Close()
				}
				errc <- err
			}))
			defer srv.Close()

			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req := upgradeRequest(t, method, srv.URL)
			if tt.change != nil {
				tt.change(req.Header)
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tt.wantStatus, resp.StatusCode, string(body))

			err = <-errc
			if tt.wantStatus == http.StatusSwitchingProtocols {
				require.NoError(t, err)
				return
			}
			var he *HandshakeError
			require.ErrorAs(t, err, &he)
			require.Equal(t, tt.wantStatus, he.StatusCode)
			require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			require.Contains(t, string(body), tt.wantBody)
			if tt.wantStatus == http.StatusUpgradeRequired {
				require.Equal(t, "13", resp.Header.Get("Sec-WebSocket-Version"))
			}
		})
	}
}

// roundTripRaw sends req on a new connection to srv and reads the response
// (a 101 is not something http.Client hands back with its connection).
func roundTripRaw(t *testing.T, srv *httptest.Server, req *http.Request) *http.Response {
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, req.Write(conn))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	require.NoError(t, err)
	return resp
}

// Upgrade finds wsmux.v1 among several offered protocols and header lines,
// and its 101 passes CheckResponse.
func TestUpgradeSelectsAmongOffers(t *testing.T) {
	done := make(chan error, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, _, err := Upgrade(w, r, nil)
		if err == nil {
			conn.Close()
		}
		done <- err
	}))
	defer srv.Close()
	req := upgradeRequest(t, http.MethodGet, srv.URL)
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, "+Subprotocol)
	req.Header.Add("Sec-WebSocket-Protocol", "x.v1")
	resp := roundTripRaw(t, srv, req)
	require.Nil(t, CheckResponse(resp, req.Header.Get("Sec-WebSocket-Key")))
	require.NoError(t, <-done)
}

// The 101 carries the caller's headers but never a second copy of the
// handshake's own, a body header, or a value that would split the response.
func TestUpgradeResponseHeaders(t *testing.T) {
	done := make(chan error, 1)
	respHeader := http.Header{
		"X-Stream-Protocol-Version": {"v4.channel.k8s.io"},
		"X-Two":                     {"a", "b"},
		"Content-Type":              {"text/plain"},
		"Sec-Websocket-Protocol":    {"evil"},
		"Upgrade":                   {"h2c"},
		"X-Split":                   {"x\r\nInjected: 1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, br, err := Upgrade(w, r, respHeader)
		if err != nil {
			done <- err
			return
		}
		defer conn.Close()
		// The bytes the client pipelined after its request are in br.
		b := make([]byte, 4)
		_, err = io.ReadFull(br, b)
		if err == nil && string(b) != "ping" {
			err = io.ErrUnexpectedEOF
		}
		done <- err
	}))
	defer srv.Close()
	req := upgradeRequest(t, http.MethodGet, srv.URL)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	var wire strings.Builder
	require.NoError(t, req.Write(&wire))
	_, err = conn.Write([]byte(wire.String() + "ping"))
	require.NoError(t, err)
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	require.NoError(t, err)
	require.Equal(t, http.StatusSwitchingProtocols, resp.StatusCode)
	require.Nil(t, CheckResponse(resp, req.Header.Get("Sec-WebSocket-Key")))
	require.Equal(t, "v4.channel.k8s.io", resp.Header.Get("X-Stream-Protocol-Version"))
	require.Equal(t, []string{"a", "b"}, resp.Header.Values("X-Two"))
	require.Equal(t, []string{Subprotocol}, resp.Header.Values("Sec-WebSocket-Protocol"))
	require.Equal(t, []string{"websocket"}, resp.Header.Values("Upgrade"))
	require.Empty(t, resp.Header.Get("Content-Type"))
	require.Empty(t, resp.Header.Get("X-Split"))
	require.Empty(t, resp.Header.Get("Injected"))
	require.NoError(t, <-done)
	require.Equal(t, "v4.channel.k8s.io", respHeader.Get("X-Stream-Protocol-Version"), "respHeader is not modified")
	require.Equal(t, "text/plain", respHeader.Get("Content-Type"))
}

// plainWriter is a ResponseWriter that cannot be hijacked.
type plainWriter struct {
	header http.Header
	status int
}

func (w *plainWriter) Header() http.Header         { return w.header }
func (w *plainWriter) Write(b []byte) (int, error) { return len(b), nil }
func (w *plainWriter) WriteHeader(status int)      { w.status = status }

func TestUpgradeWithoutHijack(t *testing.T) {
	w := &plainWriter{header: http.Header{}}
	_, _, err := Upgrade(w, upgradeRequest(t, http.MethodGet, "http://example.com/"), nil)
	var he *HandshakeError
	require.ErrorAs(t, err, &he)
	require.Equal(t, http.StatusInternalServerError, he.StatusCode)
	require.Equal(t, http.StatusInternalServerError, w.status)
}

func TestIsRequest(t *testing.T) {
	req := upgradeRequest(t, http.MethodGet, "http://example.com/")
	require.True(t, IsRequest(req))
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io, "+Subprotocol)
	require.True(t, IsRequest(req))
	req.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io")
	require.False(t, IsRequest(req), "Kubernetes' own WebSocket protocol")
	req = upgradeRequest(t, http.MethodPost, "http://example.com/")
	req.Header.Set("Upgrade", "SPDY/3.1")
	require.False(t, IsRequest(req), "a SPDY upgrade")
}

// The package is imported by mux and the adapters: it may import only the
// standard library (so neither Kubernetes nor anything of this module).
func TestImportsOnlyStandardLibrary(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	n := 0
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		n++
		src, err := os.ReadFile(f)
		require.NoError(t, err)
		parsed, err := parser.ParseFile(token.NewFileSet(), f, src, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			require.NoError(t, err)
			if first, _, _ := strings.Cut(path, "/"); strings.Contains(first, ".") {
				t.Errorf("%s imports %s, which is not in the standard library", f, path)
			}
		}
	}
	require.Positive(t, n)
}
