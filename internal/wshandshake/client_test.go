package wshandshake

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// echoHandler upgrades with Upgrade, greets the client, echoes one 7-byte
// message and reports what it saw.
type echoHandler struct {
	gotReq chan *http.Request
	done   chan error
}

func newEchoHandler() *echoHandler {
	return &echoHandler{gotReq: make(chan *http.Request, 1), done: make(chan error, 1)}
}

func (h *echoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.gotReq <- r.Clone(context.Background())
	conn, br, err := Upgrade(w, r, http.Header{"X-Stream-Protocol-Version": {"v5.test"}})
	if err != nil {
		h.done <- err
		return
	}
	defer conn.Close()
	h.done <- func() error {
		if _, err := conn.Write([]byte("hello")); err != nil {
			return err
		}
		msg := make([]byte, 7)
		if _, err := io.ReadFull(br, msg); err != nil {
			return err
		}
		_, err := conn.Write(msg)
		return err
	}()
}

// reader is where the bytes after the handshake are: br if Dial returned one.
func reader(conn net.Conn, br *bufio.Reader) io.Reader {
	if br != nil {
		return br
	}
	return conn
}

func TestDialUpgrade(t *testing.T) {
	tests := []struct {
		name   string
		tls    bool
		scheme string
	}{
		{name: "ws", scheme: "ws"},
		{name: "http mapped to ws", scheme: "http"},
		{name: "wss", tls: true, scheme: "wss"},
		{name: "https mapped to wss", tls: true, scheme: "https"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newEchoHandler()
			var srv *httptest.Server
			var opts DialOptions
			if tt.tls {
				srv = httptest.NewTLSServer(h)
				opts.TLSConfig = srv.Client().Transport.(*http.Transport).TLSClientConfig
			} else {
				srv = httptest.NewServer(h)
			}
			defer srv.Close()
			opts.Header = http.Header{
				"X-Stream-Protocol-Version": {"v4.channel.k8s.io"},
				"Authorization":             {"Bearer token"},
				"Sec-Websocket-Protocol":    {"overwritten"},
			}
			url := tt.scheme + "://" + strings.TrimPrefix(strings.TrimPrefix(srv.URL, "http://"), "https://") + "/exec?x=1"

			conn, br, hdr, err := Dial(context.Background(), url, opts)
			require.NoError(t, err)
			defer conn.Close()
			if tt.tls {
				_, ok := conn.(*tls.Conn)
				require.True(t, ok, "wss is TLS")
			}
			require.Equal(t, Subprotocol, hdr.Get("Sec-WebSocket-Protocol"))
			require.Equal(t, "v5.test", hdr.Get("X-Stream-Protocol-Version"), "extra response header")
			require.Empty(t, hdr.Get("Sec-WebSocket-Accept"), "the handshake's own headers are left out")
			require.Empty(t, hdr.Get("Upgrade"))
			require.Equal(t, "overwritten", opts.Header.Get("Sec-WebSocket-Protocol"), "the caller's header is not modified")

			got := <-h.gotReq
			require.Equal(t, http.MethodGet, got.Method)
			require.Equal(t, "/exec", got.URL.Path)
			require.Equal(t, "x=1", got.URL.RawQuery)
			require.Equal(t, "v4.channel.k8s.io", got.Header.Get("X-Stream-Protocol-Version"), "custom header arrives")
			require.Equal(t, "Bearer token", got.Header.Get("Authorization"))
			require.Equal(t, []string{Subprotocol}, got.Header.Values("Sec-WebSocket-Protocol"))

			rd := reader(conn, br)
			msg := make([]byte, 5)
			_, err = io.ReadFull(rd, msg)
			require.NoError(t, err)
			require.Equal(t, "hello", string(msg))
			_, err = conn.Write([]byte("echo me"))
			require.NoError(t, err)
			msg = make([]byte, 7)
			_, err = io.ReadFull(rd, msg)
			require.NoError(t, err)
			require.Equal(t, "echo me", string(msg))
			require.NoError(t, <-h.done)
		})
	}
}

// rawServer answers every request with respond's bytes on the hijacked
// connection.
func rawServer(t *testing.T, respond func(r *http.Request) string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		rw.WriteString(respond(r))
		rw.Flush()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func switching(r *http.Request, extra string) string {
	return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
		"Sec-WebSocket-Accept: " + AcceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n" + extra + "\r\n"
}

// Bytes the server sends with its 101 are in the returned reader.
func TestDialKeepsEarlyBytes(t *testing.T) {
	srv := rawServer(t, func(r *http.Request) string {
		return switching(r, "Sec-WebSocket-Protocol: "+Subprotocol+"\r\n") + "early"
	})
	conn, br, _, err := Dial(context.Background(), srv.URL, DialOptions{})
	require.NoError(t, err)
	defer conn.Close()
	require.NotNil(t, br)
	b := make([]byte, 5)
	_, err = io.ReadFull(br, b)
	require.NoError(t, err)
	require.Equal(t, "early", string(b))
}

func TestDialHandshakeErrors(t *testing.T) {
	bigBody := strings.Repeat("b", 100<<10)
	tests := []struct {
		name       string
		handler    func(w http.ResponseWriter, r *http.Request)
		wantStatus int
		wantBody   string
		wantHeader http.Header
		wantReason string
	}{
		{
			name:       "server without subprotocol",
			handler:    raw(func(r *http.Request) string { return switching(r, "") }),
			wantStatus: http.StatusSwitchingProtocols,
			wantReason: "did not select",
		},
		{
			name:       "server selecting another subprotocol",
			handler:    raw(func(r *http.Request) string { return switching(r, "Sec-WebSocket-Protocol: other.v1\r\n") }),
			wantStatus: http.StatusSwitchingProtocols,
			wantReason: "not offered",
		},
		{
			name: "wrong accept key",
			handler: raw(func(r *http.Request) string {
				return "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
					"Sec-WebSocket-Accept: " + AcceptKey("other") + "\r\nSec-WebSocket-Protocol: " + Subprotocol + "\r\n\r\n"
			}),
			wantStatus: http.StatusSwitchingProtocols,
			wantReason: "Sec-WebSocket-Accept",
		},
		{
			name: "extension not offered",
			handler: raw(func(r *http.Request) string {
				return switching(r, "Sec-WebSocket-Protocol: "+Subprotocol+"\r\nSec-WebSocket-Extensions: permessage-deflate\r\n")
			}),
			wantStatus: http.StatusSwitchingProtocols,
			wantReason: "extensions",
		},
		{
			name: "403 with body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Reason", "policy")
				http.Error(w, "forbidden: wsmux not spoken here", http.StatusForbidden)
			},
			wantStatus: http.StatusForbidden,
			wantBody:   "forbidden: wsmux not spoken here\n",
			wantHeader: http.Header{"X-Reason": {"policy"}},
		},
		{
			name: "404 without body",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusNotFound)
			},
			wantStatus: http.StatusNotFound,
		},
		{
			name: "500 with a body over 64 KiB",
			handler: func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusInternalServerError)
				io.WriteString(w, bigBody)
			},
			wantStatus: http.StatusInternalServerError,
			wantBody:   bigBody[:MaxHandshakeBody],
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			done := make(chan struct{})
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer close(done)
				tt.handler(w, r)
			}))
			defer srv.Close()
			conn, br, hdr, err := Dial(context.Background(), srv.URL, DialOptions{})
			<-done
			require.Nil(t, conn)
			require.Nil(t, br)
			require.Nil(t, hdr)
			var he *HandshakeError
			require.ErrorAs(t, err, &he)
			require.Equal(t, tt.wantStatus, he.StatusCode)
			require.Equal(t, tt.wantBody, string(he.Body))
			for k := range tt.wantHeader {
				require.Equal(t, tt.wantHeader.Get(k), he.Header.Get(k))
			}
			require.Contains(t, he.Reason, tt.wantReason)
			require.NotEmpty(t, he.Error())
		})
	}
}

// raw is a handler answering with respond's bytes on the hijacked connection.
func raw(respond func(r *http.Request) string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		rw.WriteString(respond(r))
		rw.Flush()
	}
}

func TestDialTimeouts(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c // a server that never answers
		}
	}()
	url := "ws://" + ln.Addr().String() + "/"

	t.Run("options timeout", func(t *testing.T) {
		_, _, _, err := Dial(context.Background(), url, DialOptions{Timeout: 100 * time.Millisecond})
		var ne net.Error
		require.ErrorAs(t, err, &ne)
		require.True(t, ne.Timeout(), "%v", err)
	})
	t.Run("context deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_, _, _, err := Dial(ctx, url, DialOptions{Timeout: time.Minute})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
	t.Run("context cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, _, _, err := Dial(ctx, url, DialOptions{Timeout: time.Minute})
		require.ErrorIs(t, err, context.Canceled)
	})
	ln.Close()
	for c := range accepted {
		c.Close()
	}
}

func TestDialBadURL(t *testing.T) {
	for _, u := range []string{"ftp://example.com/", "://nope", "example.com", "ws:///path"} {
		_, _, _, err := Dial(context.Background(), u, DialOptions{})
		require.Error(t, err, u)
		var he *HandshakeError
		require.False(t, errors.As(err, &he), "%s: %v is not a handshake error", u, err)
	}
}

// The NetDial option is used, with the URL's host and the scheme's default
// port.
func TestDialNetDial(t *testing.T) {
	srv := httptest.NewServer(newEchoHandler())
	defer srv.Close()
	var got []string
	opts := DialOptions{NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		got = append(got, network+" "+addr)
		var d net.Dialer
		return d.DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	conn, _, _, err := Dial(context.Background(), "ws://example.invalid/x", opts)
	require.NoError(t, err)
	conn.Close()
	require.Equal(t, []string{"tcp example.invalid:80"}, got)
}

func TestPrepareRequest(t *testing.T) {
	req, err := http.NewRequest(http.MethodPost, "https://example.com/api?x=1", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer t")
	req.Header.Set("Sec-WebSocket-Extensions", "permessage-deflate")
	key := PrepareRequest(req)
	require.Equal(t, http.MethodGet, req.Method)
	require.Equal(t, key, req.Header.Get("Sec-WebSocket-Key"))
	require.Equal(t, Subprotocol, req.Header.Get("Sec-WebSocket-Protocol"))
	require.Equal(t, "13", req.Header.Get("Sec-WebSocket-Version"))
	require.Equal(t, "Upgrade", req.Header.Get("Connection"))
	require.Equal(t, "websocket", req.Header.Get("Upgrade"))
	require.Empty(t, req.Header.Get("Sec-WebSocket-Extensions"))
	require.Equal(t, "Bearer t", req.Header.Get("Authorization"))
	require.True(t, IsRequest(req))
	require.NotEqual(t, key, PrepareRequest(req), "keys are random")
	require.NotNil(t, func() *http.Request { r := &http.Request{}; PrepareRequest(r); return r }().Header)
}

func TestCheckResponse(t *testing.T) {
	const key = "dGhlIHNhbXBsZSBub25jZQ=="
	good := func() *http.Response {
		return &http.Response{StatusCode: 101, Header: http.Header{
			"Connection":             {"keep-alive, Upgrade"},
			"Upgrade":                {"WebSocket"},
			"Sec-Websocket-Accept":   {"s3pPLMBiTxaQ9kYGzzhZRbK+xOo="},
			"Sec-Websocket-Protocol": {Subprotocol},
		}}
	}
	require.Nil(t, CheckResponse(good(), key))
	tests := []struct {
		name   string
		change func(r *http.Response)
		reason string
	}{
		{"status", func(r *http.Response) { r.StatusCode = 200 }, "status 200"},
		{"no Connection", func(r *http.Response) { r.Header.Del("Connection") }, "Connection"},
		{"no Upgrade", func(r *http.Response) { r.Header.Set("Upgrade", "h2c") }, "Upgrade"},
		{"accept", func(r *http.Response) { r.Header.Set("Sec-WebSocket-Accept", AcceptKey("x")) }, "Sec-WebSocket-Accept"},
		{"no subprotocol", func(r *http.Response) { r.Header.Del("Sec-WebSocket-Protocol") }, "did not select"},
		{"other subprotocol", func(r *http.Response) { r.Header.Set("Sec-WebSocket-Protocol", "v5.channel.k8s.io") }, "not offered"},
		{"extensions", func(r *http.Response) { r.Header.Set("Sec-WebSocket-Extensions", "permessage-deflate") }, "extensions"},
	}
	for _, tt := range tests {
		r := good()
		tt.change(r)
		he := CheckResponse(r, key)
		if he == nil {
			t.Errorf("%s: accepted", tt.name)
			continue
		}
		require.Equal(t, r.StatusCode, he.StatusCode, tt.name)
		require.Contains(t, he.Reason, tt.reason, tt.name)
	}
}

// RFC 6455 section 1.3's example.
func TestAcceptKey(t *testing.T) {
	require.Equal(t, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", AcceptKey("dGhlIHNhbXBsZSBub25jZQ=="))
	require.Len(t, NewKey(), 24)
}

func TestErrorStrings(t *testing.T) {
	require.Contains(t, (&HandshakeError{StatusCode: 403, Body: []byte("nope")}).Error(), "403 Forbidden: nope")
	require.Contains(t, (&HandshakeError{StatusCode: 101, Reason: "no subprotocol"}).Error(), "101 Switching Protocols: no subprotocol")
	long := (&HandshakeError{StatusCode: 500, Body: []byte(strings.Repeat("x", 1000))}).Error()
	require.Less(t, len(long), 400, "a long body is clipped")
}
