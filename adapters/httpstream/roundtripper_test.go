package httpstream_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	clientspdy "k8s.io/client-go/transport/spdy"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// echoServer upgrades with wsmux and echoes every stream.
func echoHandler(t testing.TB) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := k8shttpstream.Handshake(r, w, []string{testProtocol}); err != nil {
			return
		}
		var c k8shttpstream.Connection
		c = wsmuxhttpstream.NewResponseUpgraderForStreaming().UpgradeResponse(w, r, func(s k8shttpstream.Stream, replySent <-chan struct{}) error {
			go func() {
				<-replySent
				_, _ = io.Copy(s, s)
				_ = s.Close()
			}()
			return nil
		})
		if c != nil {
			<-c.CloseChan()
		}
	})
}

func roundTripEcho(t *testing.T, rt *wsmuxhttpstream.RoundTripper, u string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, nil)
	conn, proto, err := clientspdy.Negotiate(rt, &http.Client{Transport: rt}, req, "other.k8s.io", testProtocol)
	if err != nil {
		t.Fatalf("Negotiate: %v", err)
	}
	defer conn.Close()
	if proto != testProtocol {
		t.Fatalf("protocol %q, want %q (X-Stream-Protocol-Version must reach the client in the 101)", proto, testProtocol)
	}
	s, err := conn.CreateStream(http.Header{"Streamtype": {"data"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	b, err := io.ReadAll(s)
	if err != nil || string(b) != "ping" {
		t.Fatalf("echo %q, %v", b, err)
	}
}

func TestRoundTripperPlain(t *testing.T) {
	srv := httptest.NewServer(echoHandler(t))
	defer srv.Close()
	rt, err := wsmuxhttpstream.NewRoundTripper(nil)
	if err != nil {
		t.Fatal(err)
	}
	roundTripEcho(t, rt, srv.URL)
}

func TestRoundTripperTLS(t *testing.T) {
	srv := httptest.NewTLSServer(echoHandler(t))
	defer srv.Close()
	pool := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	rt, err := wsmuxhttpstream.NewRoundTripper(&tls.Config{RootCAs: pool, NextProtos: []string{"h2", "http/1.1"}})
	if err != nil {
		t.Fatal(err)
	}
	roundTripEcho(t, rt, srv.URL)

	// Without the CA the handshake fails verification.
	rt2, _ := wsmuxhttpstream.NewRoundTripper(nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	if _, err := rt2.RoundTrip(req); err == nil {
		t.Fatal("TLS without the server's CA succeeded")
	}
}

func TestRoundTripperUpgradeTransport(t *testing.T) {
	srv := httptest.NewTLSServer(echoHandler(t))
	defer srv.Close()
	var dials atomic.Int32
	tr := srv.Client().Transport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	if _, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{UpgradeTransport: tr, TLS: &tls.Config{}}); err == nil {
		t.Fatal("UpgradeTransport with TLS accepted")
	}
	rt, err := wsmuxhttpstream.NewRoundTripperWithConfig(wsmuxhttpstream.RoundTripperConfig{UpgradeTransport: tr})
	if err != nil {
		t.Fatal(err)
	}
	roundTripEcho(t, rt, srv.URL)
	if dials.Load() != 1 {
		t.Fatalf("UpgradeTransport's dialer used %d times", dials.Load())
	}
}

// connectProxy is a minimal HTTP CONNECT proxy requiring basic auth.
func connectProxy(t *testing.T) (*url.URL, *atomic.Int32) {
	var n atomic.Int32
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil || req.Method != http.MethodConnect {
					return
				}
				if req.Header.Get("Proxy-Authorization") != "Basic dXNlcjpwQHNz" { // user:p@ss
					io.WriteString(c, "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
					return
				}
				up, err := net.Dial("tcp", req.Host)
				if err != nil {
					io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
					return
				}
				defer up.Close()
				n.Add(1)
				io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
				done := make(chan struct{})
				go func() { io.Copy(up, br); up.(*net.TCPConn).CloseWrite(); close(done) }()
				io.Copy(c, up)
				<-done
			}()
		}
	}()
	u, _ := url.Parse("http://user:p%40ss@" + ln.Addr().String())
	return u, &n
}

func TestRoundTripperHTTPConnectProxy(t *testing.T) {
	for _, tlsServer := range []bool{false, true} {
		name := "http"
		if tlsServer {
			name = "https"
		}
		t.Run(name, func(t *testing.T) {
			var srv *httptest.Server
			var cfg *tls.Config
			if tlsServer {
				srv = httptest.NewTLSServer(echoHandler(t))
				cfg = &tls.Config{RootCAs: srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs}
			} else {
				srv = httptest.NewServer(echoHandler(t))
			}
			defer srv.Close()
			pu, n := connectProxy(t)
			rt, err := wsmuxhttpstream.NewRoundTripperWithProxy(cfg, func(*http.Request) (*url.URL, error) { return pu, nil })
			if err != nil {
				t.Fatal(err)
			}
			roundTripEcho(t, rt, srv.URL)
			if n.Load() != 1 {
				t.Fatalf("proxy tunnelled %d connections", n.Load())
			}
			// Wrong credentials: the CONNECT fails.
			bad := *pu
			bad.User = url.UserPassword("user", "wrong")
			rt2, _ := wsmuxhttpstream.NewRoundTripperWithProxy(cfg, func(*http.Request) (*url.URL, error) { return &bad, nil })
			req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
			if _, err := rt2.RoundTrip(req); err == nil || !strings.Contains(err.Error(), "407") {
				t.Fatalf("bad proxy credentials: %v", err)
			}
		})
	}
}

// A server that does not speak wsmux (an unmodified kubelet answers 403):
// NewConnection returns UpgradeFailureError with the status and body, in
// both type worlds.
func TestRoundTripperUpgradeFailure(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `{"kind":"Status","message":"websocket subprotocol not supported"}`)
	}))
	defer srv.Close()
	rt, _ := wsmuxhttpstream.NewRoundTripper(nil)
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	_, _, err := clientspdy.Negotiate(rt, &http.Client{Transport: rt}, req, testProtocol)
	var ufe *apihttpstream.UpgradeFailureError
	if !errors.As(err, &ufe) || !apihttpstream.IsUpgradeFailure(err) {
		t.Fatalf("Negotiate = %v (%T), want *UpgradeFailureError", err, err)
	}
	var ue *wsmuxhttpstream.UpgradeError
	if !errors.As(ufe.Cause, &ue) || ue.StatusCode != http.StatusForbidden || !strings.Contains(string(ue.Body), "not supported") {
		t.Fatalf("cause %#v", ufe.Cause)
	}
	if !strings.Contains(err.Error(), "websocket subprotocol not supported") {
		t.Fatalf("message %q lacks the server's message", err)
	}

	srt := rt.ForStreaming()
	req, _ = http.NewRequest(http.MethodPost, srv.URL, nil)
	resp, err := srt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	_, err = srt.NewConnection(resp)
	if !k8shttpstream.IsUpgradeFailure(err) {
		t.Fatalf("streaming NewConnection = %v, want k8s.io/streaming UpgradeFailureError", err)
	}
}

// The response upgrader answers a request that is not a wsmux upgrade with
// 400 and returns nil, like the SPDY upgrader.
func TestResponseUpgraderRejectsNonWsmux(t *testing.T) {
	got := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- wsmuxhttpstream.NewResponseUpgrader().UpgradeResponse(w, r, apihttpstream.NoOpNewStreamHandler) == nil
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !<-got {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

// The subprotocol must not be one the apiserver intercepts.
func TestSubprotocolNotIntercepted(t *testing.T) {
	p := wsmuxhttpstream.Subprotocol
	if p == "v5.channel.k8s.io" || (strings.HasPrefix(p, "SPDY/3.1+") && strings.HasSuffix(p, ".k8s.io")) {
		t.Fatalf("subprotocol %q is intercepted by kube-apiserver", p)
	}
}

// *RoundTripper is accepted wherever client-go takes the SPDY round tripper.
var (
	_ clientspdy.Upgrader                                                              = (*wsmuxhttpstream.RoundTripper)(nil)
	_ apihttpstream.UpgradeRoundTripper                                                = (*wsmuxhttpstream.RoundTripper)(nil)
	_ k8shttpstream.UpgradeRoundTripper                                                = (*wsmuxhttpstream.StreamingRoundTripper)(nil)
	_ apihttpstream.ResponseUpgrader                                                   = wsmuxhttpstream.NewResponseUpgrader()
	_ k8shttpstream.ResponseUpgrader                                                   = wsmuxhttpstream.NewResponseUpgraderForStreaming()
	_ func(net.Conn) (apihttpstream.Connection, error)                                 = wsmuxhttpstream.NewClientConnection
	_ func(net.Conn, apihttpstream.NewStreamHandler) (apihttpstream.Connection, error) = wsmuxhttpstream.NewServerConnection
)
