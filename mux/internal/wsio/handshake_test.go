package wsio

import (
	"context"
	"crypto/sha1"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/stretchr/testify/require"
)

// echoHandler upgrades with Upgrade, greets the client, echoes one message and
// answers the client's close. It reports what it saw on the channels.
type echoHandler struct {
	gotHeader chan http.Header
	done      chan error
}

func newEchoHandler() *echoHandler {
	return &echoHandler{gotHeader: make(chan http.Header, 1), done: make(chan error, 1)}
}

func (h *echoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.gotHeader <- r.Header.Clone()
	conn, br, err := Upgrade(w, r, http.Header{"X-Stream-Protocol-Version": {"v5.test"}})
	if err != nil {
		h.done <- err
		return
	}
	defer conn.Close()
	h.done <- serveEcho(New(conn, br, false, 0))
}

func serveEcho(c *Conn) error {
	if err := c.WriteMessage(append(make([]byte, HeaderRoom), "hello"...)); err != nil {
		return err
	}
	msg, err := c.ReadMessage()
	if err != nil {
		return err
	}
	if err := c.WriteMessage(append(make([]byte, HeaderRoom), msg...)); err != nil {
		return err
	}
	_, err = c.ReadMessage()
	var ce *CloseError
	if !errors.As(err, &ce) {
		return err
	}
	return c.FlushControl()
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

			got := <-h.gotHeader
			require.Equal(t, "v4.channel.k8s.io", got.Get("X-Stream-Protocol-Version"), "custom header arrives")
			require.Equal(t, "Bearer token", got.Get("Authorization"))

			c := New(conn, br, true, 0)
			msg, err := c.ReadMessage()
			require.NoError(t, err)
			require.Equal(t, "hello", string(msg))
			require.NoError(t, c.WriteMessage(append(make([]byte, HeaderRoom), "echo me"...)))
			msg, err = c.ReadMessage()
			require.NoError(t, err)
			require.Equal(t, "echo me", string(msg))

			require.NoError(t, c.WriteClose(ws.StatusNormalClosure, "done"))
			_, err = c.ReadMessage()
			var ce *CloseError
			require.ErrorAs(t, err, &ce)
			require.Equal(t, ws.StatusNormalClosure, ce.Code)
			require.NoError(t, <-h.done)
		})
	}
}

// acceptKey computes Sec-WebSocket-Accept for a key (RFC 6455 section 4.2.2).
func acceptKey(key string) string {
	s := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	return base64.StdEncoding.EncodeToString(s[:])
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
			name: "server without subprotocol",
			handler: func(w http.ResponseWriter, r *http.Request) {
				conn, _, _, err := ws.UpgradeHTTP(r, w)
				if err == nil {
					conn.Close()
				}
			},
			wantStatus: http.StatusSwitchingProtocols,
			wantReason: "did not select",
		},
		{
			name: "server selecting another subprotocol",
			handler: func(w http.ResponseWriter, r *http.Request) {
				conn, rw, err := http.NewResponseController(w).Hijack()
				if err != nil {
					return
				}
				defer conn.Close()
				rw.WriteString("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n" +
					"Sec-WebSocket-Accept: " + acceptKey(r.Header.Get("Sec-WebSocket-Key")) + "\r\n" +
					"Sec-WebSocket-Protocol: other.v1\r\n\r\n")
				rw.Flush()
			},
			wantStatus: http.StatusSwitchingProtocols,
			wantReason: "not offered",
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

func TestUpgradeRejects(t *testing.T) {
	tests := []struct {
		name       string
		protocols  []string
		method     string
		wantStatus int
	}{
		{name: "no subprotocol offered", wantStatus: http.StatusBadRequest},
		{name: "other subprotocols only", protocols: []string{"v5.channel.k8s.io", "wsmux.v2"}, wantStatus: http.StatusBadRequest},
		{name: "bad method", protocols: []string{Subprotocol}, method: http.MethodPost, wantStatus: http.StatusMethodNotAllowed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			errc := make(chan error, 1)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				conn, br, err := Upgrade(w, r, nil)
				if err == nil {
					conn.Close()
					_ = br
				}
				errc <- err
			}))
			defer srv.Close()

			method := tt.method
			if method == "" {
				method = http.MethodGet
			}
			req, err := http.NewRequest(method, srv.URL, nil)
			require.NoError(t, err)
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			if len(tt.protocols) > 0 {
				req.Header.Set("Sec-WebSocket-Protocol", strings.Join(tt.protocols, ", "))
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, tt.wantStatus, resp.StatusCode, string(body))

			err = <-errc
			var he *HandshakeError
			require.ErrorAs(t, err, &he)
			require.Equal(t, tt.wantStatus, he.StatusCode)
			if tt.wantStatus == http.StatusBadRequest {
				require.Contains(t, string(body), Subprotocol)
				require.Equal(t, "text/plain; charset=utf-8", resp.Header.Get("Content-Type"))
			}
		})
	}
}

// Upgrade finds wsmux.v1 among several offered protocols and header lines.
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
	d := ws.Dialer{Protocols: []string{"v5.channel.k8s.io", Subprotocol, "x.v1"}}
	conn, _, hs, err := d.Dial(context.Background(), "ws"+strings.TrimPrefix(srv.URL, "http"))
	require.NoError(t, err)
	conn.Close()
	require.Equal(t, Subprotocol, hs.Protocol)
	require.NoError(t, <-done)
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
	ln.Close()
	for c := range accepted {
		c.Close()
	}
}

func TestDialBadURL(t *testing.T) {
	for _, u := range []string{"ftp://example.com/", "://nope", "example.com"} {
		_, _, _, err := Dial(context.Background(), u, DialOptions{})
		require.Error(t, err, u)
	}
}
