package tunnel

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testToken = "t0ken-for-tests"

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func echoServer(t testing.TB) string { return testnet.Echo(t) }

func tcpServer(t testing.TB, handle func(net.Conn)) string { return testnet.Serve(t, handle) }

type env struct {
	srv   *Server
	hs    *httptest.Server
	dials atomic.Int64
}

func startServer(t testing.TB, allow ...string) *env {
	t.Helper()
	e := &env{}
	var d net.Dialer
	srv, err := NewServer(ServerConfig{
		Allow:  allow,
		Auth:   auth.New([]string{testToken}, nil),
		Logger: testLogger(t),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			e.dials.Add(1)
			return d.DialContext(ctx, network, addr)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = srv
	e.hs = httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		e.hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Metrics().Sessions.Drain(ctx)
		srv.Wait()
	})
	return e
}

// startForwarder runs a Forwarder for forwards (Local ignored: ephemeral
// ports) and returns the local addresses.
func startForwarder(t testing.TB, server, token string, targets ...string) (*Forwarder, []string) {
	t.Helper()
	var fws []Forward
	for _, tg := range targets {
		fws = append(fws, Forward{Local: "127.0.0.1:0", Target: tg})
	}
	f, err := NewForwarder(ClientConfig{Server: server, Token: token, Logger: testLogger(t), DrainTimeout: 5 * time.Second}, fws)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	var addrs []string
	for _, a := range f.Addrs() {
		addrs = append(addrs, a.String())
	}
	return f, addrs
}

// roundTrip sends data through addr to an echo target, half-closes, and
// checks the echo's sha256.
func roundTrip(t testing.TB, addr string, data []byte) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	errc := make(chan error, 1)
	go func() {
		_, err := c.Write(data)
		if err == nil {
			err = c.(*net.TCPConn).CloseWrite()
		}
		errc <- err
	}()
	h := sha256.New()
	n, err := io.Copy(h, c)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("write: %v", err)
	}
	want := sha256.Sum256(data)
	if n != int64(len(data)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("echo: got %d bytes sha256 %x, want %d bytes %x", n, h.Sum(nil), len(data), want)
	}
}

func randBytes(n int) []byte {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return b
}

func TestForwardEchoSHA256(t *testing.T) {
	echo := echoServer(t)
	e := startServer(t, echo)
	_, addrs := startForwarder(t, e.hs.URL, testToken, echo)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { roundTrip(t, addrs[0], randBytes(4<<20)) })
	}
	wg.Wait()
	if got := ops.Value(e.srv.Metrics().TunnelBytes.WithLabelValues("to_target")); got != 16<<20 {
		t.Errorf("to_target bytes = %v, want %d", got, 16<<20)
	}
}

// TestHalfCloseBothWays: the target reads to EOF (the client's FIN crossed
// the tunnel) before it answers, then closes; the client reads the answer
// and EOF while its write side is already shut.
func TestHalfCloseBothWays(t *testing.T) {
	target := tcpServer(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		_, _ = io.WriteString(c, "got "+big.NewInt(n).String())
	})
	e := startServer(t, target)
	_, addrs := startForwarder(t, e.hs.URL, testToken, target)
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Write(randBytes(100000)); err != nil {
		t.Fatal(err)
	}
	if err := c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "got 100000" {
		t.Fatalf("reply %q, %v", b, err)
	}
}

func TestAuthFailures(t *testing.T) {
	echo := echoServer(t)
	e := startServer(t, echo)
	for _, tc := range []struct {
		name, token, reason, body string
	}{
		{"no token", "", auth.ReasonMissing, "no bearer token"},
		{"wrong token", "not-the-token", auth.ReasonBadToken, "invalid bearer token"},
		{"token prefix", testToken[:5], auth.ReasonBadToken, "invalid bearer token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := NewForwarder(ClientConfig{Server: e.hs.URL, Token: tc.token, Logger: testLogger(t)}, []Forward{{Local: "127.0.0.1:0", Target: echo}})
			if err != nil {
				t.Fatal(err)
			}
			err = f.Connect(context.Background())
			var he *mux.HandshakeError
			if !errors.As(err, &he) || he.StatusCode != http.StatusUnauthorized {
				t.Fatalf("Connect: %v, want a 401 handshake error", err)
			}
			if !strings.Contains(string(he.Body), tc.body) {
				t.Errorf("401 body %q does not say %q", he.Body, tc.body)
			}
			if got := ops.Value(e.srv.Metrics().AuthFailures.WithLabelValues(tc.reason)); got < 1 {
				t.Errorf("auth failure %s not counted", tc.reason)
			}
		})
	}
	// Plain HTTP, not even an upgrade: still 401 first.
	resp, err := http.Get(e.hs.URL + DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET without token: %d", resp.StatusCode)
	}
	if n := e.dials.Load(); n != 0 {
		t.Errorf("%d targets dialled for unauthenticated callers", n)
	}
	if n := e.srv.Metrics().Sessions.Len(); n != 0 {
		t.Errorf("%d sessions started for unauthenticated callers", n)
	}
}

func TestDisallowedTargetRefused(t *testing.T) {
	echo := echoServer(t)
	other := echoServer(t)
	e := startServer(t, echo)

	// Through the forwarder: the local connection ends with no data.
	_, addrs := startForwarder(t, e.hs.URL, testToken, other)
	// (The refusal is fast enough that the reset may even beat Dial.)
	if c, err := net.Dial("tcp", addrs[0]); err == nil {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c)
		c.Close()
		if len(b) != 0 {
			t.Fatalf("got %q from a refused target", b)
		}
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}

	// On the wire: the open is refused with the application code.
	s, err := (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer " + testToken}}}).Dial(context.Background(), wsURL(t, e.hs.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, tc := range []struct {
		target string
		code   string
	}{
		{other, "TARGET_NOT_ALLOWED"},
		{"", "BAD_REQUEST"},
		{"no-port", "BAD_REQUEST"},
	} {
		_, err = s.Open(context.Background(), http.Header{TargetHeader: {tc.target}})
		var se *mux.StreamError
		if !errors.As(err, &se) || CodeName(se.Code) != tc.code || !se.Remote {
			t.Fatalf("Open(%q): %v, want a reset with %s", tc.target, err, tc.code)
		}
	}
	if n := e.dials.Load(); n != 0 {
		t.Errorf("%d dials for refused targets", n)
	}
	if got := ops.Value(e.srv.Metrics().TunnelRefused.WithLabelValues("not_allowed")); got != 2 {
		t.Errorf("not_allowed refusals = %v, want 2", got)
	}
	// The session survived the refusals.
	st, err := s.Open(context.Background(), http.Header{TargetHeader: {echo}})
	if err != nil {
		t.Fatal(err)
	}
	st.Write([]byte("ping"))
	st.CloseWrite()
	if b, err := io.ReadAll(st); err != nil || string(b) != "ping" {
		t.Fatalf("echo after refusals: %q %v", b, err)
	}
}

func TestDialFailureRefused(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	e := startServer(t, dead)
	s, err := (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer " + testToken}}}).Dial(context.Background(), wsURL(t, e.hs.URL))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Open(context.Background(), http.Header{TargetHeader: {dead}})
	var se *mux.StreamError
	if !errors.As(err, &se) || se.Code != CodeDialFailed || !strings.Contains(se.Reason, "refused") {
		t.Fatalf("Open: %v, want TARGET_DIAL_FAILED with the cause", err)
	}
}

// TestGracefulShutdown: SIGTERM's path (ops.Serve's ctx ends) sends GOAWAY;
// a stream already open finishes its transfer; Serve returns after it.
func TestGracefulShutdown(t *testing.T) {
	release := make(chan struct{})
	target := tcpServer(t, func(c net.Conn) {
		<-release
		_, _ = io.Copy(c, c)
	})
	srv, err := NewServer(ServerConfig{Allow: []string{target}, Auth: auth.New([]string{testToken}, nil), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- ops.Serve(ctx, ln, srv.Handler(), ops.ServerOptions{ShutdownTimeout: 10 * time.Second, Logger: testLogger(t)}, srv.Metrics().Sessions, srv.Health())
	}()
	s, err := (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer " + testToken}}}).Dial(context.Background(), wsURL(t, "http://"+ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(context.Background(), http.Header{TargetHeader: {target}})
	if err != nil {
		t.Fatal(err)
	}
	stop()
	// New streams are refused once the GOAWAY arrived.
	deadline := time.Now().Add(5 * time.Second)
	for {
		st2, err := s.Open(context.Background(), http.Header{TargetHeader: {target}})
		if err == nil {
			st2.CloseWrite() // opened before the GOAWAY arrived: let it end
		}
		if errors.Is(err, mux.ErrGoAway) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Open after shutdown: %v, want ErrGoAway", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with a stream still open", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	data := randBytes(1 << 20)
	go func() { st.Write(data); st.CloseWrite() }()
	got, err := io.ReadAll(st)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("draining stream: %d bytes, %v", len(got), err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the last stream ended")
	}
	srv.Wait()
}

func TestParseForward(t *testing.T) {
	for in, want := range map[string]Forward{
		"8080:db:5432":               {"127.0.0.1:8080", "db:5432"},
		"0.0.0.0:8080:DB.local:5432": {"0.0.0.0:8080", "db.local:5432"},
		"[::1]:9000:[fe80::1]:22":    {"[::1]:9000", "[fe80::1]:22"},
	} {
		got, err := ParseForward(in)
		if err != nil || got != want {
			t.Errorf("ParseForward(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "8080", "8080:db", "a:b:c:d:e", "8080:db:", "8080:db:notaport"} {
		if _, err := ParseForward(in); err == nil {
			t.Errorf("ParseForward(%q) accepted", in)
		}
	}
}

func openFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

func wsURL(t testing.TB, base string) string {
	u, err := WebSocketURL(base, DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
