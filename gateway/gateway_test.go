package gateway

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport"
	clientspdy "k8s.io/client-go/transport/spdy"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"

	"github.com/wsmux/wsmux/adapters/bridge"
	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, testnet.IgnoredGoroutines()...) }

const callerToken = "caller-token"

type gw struct {
	g   *Gateway
	srv *httptest.Server
	cl  *clustertest.Cluster
}

// startGateway runs a gateway (TLS with a client CA when ca is not nil) in
// front of a stand-in cluster.
func startGateway(t testing.TB, ca *x509.CertPool, serverCert *tls.Certificate) *gw {
	t.Helper()
	cl := clustertest.Start(t)
	g, err := New(Config{
		Auth:    auth.New([]string{callerToken}, ca),
		Cluster: cl.RestConfig(),
		Logger:  slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(g.Handler())
	if serverCert != nil {
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{*serverCert}, ClientAuth: tls.RequestClientCert, NextProtos: []string{"http/1.1"}}
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	return &gw{g: g, srv: srv, cl: cl}
}

func (g *gw) opts(token string) kubeclient.Options {
	return kubeclient.Options{Server: g.srv.URL, Token: token}
}

func execCat(t testing.TB, o kubeclient.Options, data []byte) ([]byte, error) {
	t.Helper()
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kubeclient.Exec(ctx, o, kubeclient.ExecOptions{
		Namespace: "default", Pod: "web-0", Container: "app", Command: []string{"cat"},
		Stdin: bytes.NewReader(data), Stdout: &out, Stderr: io.Discard,
	})
	return out.Bytes(), err
}

func TestExecThroughGateway(t *testing.T) {
	g := startGateway(t, nil, nil)
	data := make([]byte, 4<<20)
	rand.Read(data)
	out, err := execCat(t, g.opts(callerToken), data)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(out) != sha256.Sum256(data) {
		t.Fatalf("stdout: %d bytes, differs from the %d sent", len(out), len(data))
	}

	var stdout, stderr bytes.Buffer
	err = kubeclient.Exec(context.Background(), g.opts(callerToken), kubeclient.ExecOptions{
		Namespace: "default", Pod: "web-0", Command: []string{"err", "oh", "no"}, Stdout: &stdout, Stderr: &stderr,
	})
	if err != nil || stderr.String() != "oh no" {
		t.Fatalf("stderr %q, %v", stderr.String(), err)
	}

	stdout.Reset()
	err = kubeclient.Exec(context.Background(), g.opts(callerToken), kubeclient.ExecOptions{
		Namespace: "default", Pod: "web-0", Command: []string{"exit", "7"}, Stdout: &stdout, Stderr: io.Discard,
	})
	var ee utilexec.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 7 || stdout.String() != "bye" {
		t.Fatalf("exit: %v (stdout %q), want exit status 7 after \"bye\"", err, stdout.String())
	}

	n, seen := g.cl.Stats()
	if n != 3 {
		t.Errorf("cluster saw %d upgrades, want 3", n)
	}
	for _, a := range seen {
		if a != "Bearer "+clustertest.Token {
			t.Errorf("cluster saw Authorization %q; want only the gateway's credentials", a)
		}
	}
	if v := ops.Value(g.g.Metrics().Upgrades.WithLabelValues("wsmux", "exec")); v != 3 {
		t.Errorf("wsmux exec upgrades = %v", v)
	}
}

type sizes struct {
	ch chan *remotecommand.TerminalSize
}

func (s sizes) Next() *remotecommand.TerminalSize { return <-s.ch }

func TestExecTTY(t *testing.T) {
	g := startGateway(t, nil, nil)
	q := sizes{make(chan *remotecommand.TerminalSize, 2)}
	q.ch <- &remotecommand.TerminalSize{Width: 132, Height: 43}
	pr, pw := io.Pipe()
	var out testnet.Buffer
	done := make(chan error, 1)
	go func() {
		done <- kubeclient.Exec(context.Background(), g.opts(callerToken), kubeclient.ExecOptions{
			Namespace: "default", Pod: "web-0", Command: []string{"tty"}, Stdin: pr, Stdout: &out, TTY: true, Sizes: q,
		})
	}()
	waitFor(t, func() bool { return strings.Contains(out.String(), "size 132x43\n") })
	pw.Write([]byte("typed"))
	waitFor(t, func() bool { return strings.Contains(out.String(), "typed") })
	pw.Close()
	close(q.ch)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestPortForwardThroughGateway(t *testing.T) {
	g := startGateway(t, nil, nil)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan *kubeclient.PortForwarder, 1)
	done := make(chan error, 1)
	go func() {
		done <- kubeclient.PortForward(ctx, g.opts(callerToken), kubeclient.PortForwardOptions{
			Namespace: "default", Pod: "web-0", Ports: []string{"0:8080"}, Out: io.Discard, Err: io.Discard,
		}, func(pf *kubeclient.PortForwarder) { started <- pf })
	}()
	var pf *kubeclient.PortForwarder
	select {
	case pf = <-started:
	case err := <-done:
		t.Fatal(err)
	}
	ports, err := pf.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatal(ports, err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", ports[0].Local)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			data := make([]byte, 1<<20+i)
			rand.Read(data)
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, data) {
				t.Errorf("echo %d: %d bytes, %v", i, len(got), err)
			}
		})
	}
	wg.Wait()
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestLegacySPDYClient: today's kubectl (client-go's SPDY transport) on the
// same port.
func TestLegacySPDYClient(t *testing.T) {
	g := startGateway(t, nil, nil)
	rt, up, err := clientspdy.RoundTripperFor(&rest.Config{Host: g.srv.URL, BearerToken: callerToken})
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(g.srv.URL + "/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true")
	ex, err := remotecommand.NewSPDYExecutorForTransports(rt, up, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("via spdy"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "via spdy" {
		t.Fatalf("stdout %q", out.String())
	}
	if v := ops.Value(g.g.Metrics().Upgrades.WithLabelValues("spdy", "exec")); v != 1 {
		t.Errorf("spdy exec upgrades = %v", v)
	}
}

func TestAuthAndBadRequests(t *testing.T) {
	g := startGateway(t, nil, nil)
	for _, tc := range []struct{ name, token, reason string }{
		{"no token", "", auth.ReasonMissing},
		{"wrong token", "caller-tokeN", auth.ReasonBadToken},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := execCat(t, g.opts(tc.token), []byte("x"))
			var ae *kubeclient.AuthError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
				t.Fatalf("exec: %v, want a 401 AuthError", err)
			}
			if !strings.Contains(err.Error(), "unauthorized") {
				t.Errorf("error %q does not say why", err)
			}
			if v := ops.Value(g.g.Metrics().AuthFailures.WithLabelValues(tc.reason)); v < 1 {
				t.Errorf("%s not counted", tc.reason)
			}
		})
	}
	t.Run("port-forward wrong token", func(t *testing.T) {
		err := kubeclient.PortForward(context.Background(), g.opts("nope"), kubeclient.PortForwardOptions{
			Namespace: "default", Pod: "web-0", Ports: []string{"0:8080"}, Out: io.Discard, Err: io.Discard,
		}, nil)
		if err == nil {
			t.Fatal("port-forward with a wrong token succeeded")
		}
		var ae *kubeclient.AuthError
		if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
			t.Fatalf("port-forward: %v, want a 401 AuthError", err)
		}
	})
	for _, tc := range []struct {
		name, path string
		upgrade    bool
		want       int
		body       string
	}{
		{"bad path", "/api/v1/namespaces/default/pods/web-0/logs", true, 400, "path must be"},
		{"bad namespace", "/api/v1/namespaces/Bad_NS/pods/web-0/exec", true, 400, "path must be"},
		{"traversal", "/api/v1/namespaces/default/pods/../../secrets/exec", true, 400, "path must be"},
		{"not an upgrade", "/api/v1/namespaces/default/pods/web-0/exec", false, 400, "expected a WebSocket upgrade"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, g.srv.URL+tc.path, nil)
			req.Header.Set("Authorization", "Bearer "+callerToken)
			if tc.upgrade {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "SPDY/3.1")
				req.Header.Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want || !strings.Contains(string(body), tc.body) {
				t.Fatalf("%d %q, want %d with %q", resp.StatusCode, body, tc.want, tc.body)
			}
		})
	}
	if n, _ := g.cl.Stats(); n != 0 {
		t.Errorf("cluster saw %d requests; nothing may be forwarded", n)
	}
	http.DefaultClient.CloseIdleConnections()
}

// --- mutual TLS ---

type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
}

func newCA(t testing.TB, name string) pki {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return pki{c, key}
}

func (ca pki) issue(t testing.TB, cn string, client bool, notAfter time.Time) tls.Certificate {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-2 * time.Hour), NotAfter: notAfter,
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	if client {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	} else {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func TestClientCertificates(t *testing.T) {
	ca := newCA(t, "wsmux-test-ca")
	other := newCA(t, "some-other-ca")
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	serverCert := ca.issue(t, "gateway", false, time.Now().Add(time.Hour))
	g := startGateway(t, pool, &serverCert)

	tlsFor := func(c *tls.Certificate) *tls.Config {
		cfg := &tls.Config{RootCAs: pool}
		if c != nil {
			cfg.Certificates = []tls.Certificate{*c}
		}
		return cfg
	}
	good := ca.issue(t, "alice", true, time.Now().Add(time.Hour))
	out, err := execCat(t, kubeclient.Options{Server: g.srv.URL, TLS: tlsFor(&good)}, []byte("mtls"))
	if err != nil || string(out) != "mtls" {
		t.Fatalf("exec with a good client certificate: %q, %v", out, err)
	}

	wrongCA := other.issue(t, "mallory", true, time.Now().Add(time.Hour))
	expired := ca.issue(t, "bob", true, time.Now().Add(-time.Hour))
	for _, tc := range []struct {
		name string
		cert *tls.Certificate
		tok  string
	}{
		{"wrong CA", &wrongCA, ""},
		{"wrong CA with a valid token", &wrongCA, callerToken},
		{"expired", &expired, ""},
		{"no cert no token", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := g.cl.Stats()
			_, err := execCat(t, kubeclient.Options{Server: g.srv.URL, Token: tc.tok, TLS: tlsFor(tc.cert)}, []byte("x"))
			var ae *kubeclient.AuthError
			if !errors.As(err, &ae) || ae.StatusCode != http.StatusUnauthorized {
				t.Fatalf("exec: %v, want a 401 AuthError", err)
			}
			if after, _ := g.cl.Stats(); after != before {
				t.Error("request forwarded to the cluster")
			}
		})
	}
	if v := ops.Value(g.g.Metrics().AuthFailures.WithLabelValues(auth.ReasonBadCert)); v != 3 {
		t.Errorf("bad certificate failures = %v, want 3", v)
	}
}

// TestWsmuxUpstream: --upstream wsmux, to a cluster hop that speaks wsmux
// (here adapters/bridge's wsmux-to-SPDY translator in front of the
// stand-in); the gateway's credentials pass through it.
func TestWsmuxUpstream(t *testing.T) {
	cl := clustertest.Start(t)
	u, _ := url.Parse(cl.Server.URL)
	hop := httptest.NewServer(bridge.NewWsmuxToSPDY(u, &tls.Config{RootCAs: certPool(t, cl.CAPEM())}))
	t.Cleanup(hop.Close)
	g, err := New(Config{
		Auth:     auth.New([]string{callerToken}, nil),
		Cluster:  &rest.Config{Host: hop.URL, BearerToken: clustertest.Token},
		Upstream: UpstreamWsmux,
		Logger:   slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	out, err := execCat(t, kubeclient.Options{Server: srv.URL, Token: callerToken}, []byte("two wsmux hops"))
	if err != nil || string(out) != "two wsmux hops" {
		t.Fatalf("exec: %q, %v", out, err)
	}
	if n, _ := cl.Stats(); n != 1 {
		t.Errorf("cluster saw %d upgrades", n)
	}
}

func certPool(t testing.TB, pemBytes []byte) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(pemBytes) {
		t.Fatal("bad PEM")
	}
	return p
}

// TestAttach: plain client-go (its remotecommand executor over the wsmux
// round tripper) attaches through the gateway.
func TestAttach(t *testing.T) {
	g := startGateway(t, nil, nil)
	rt, err := wsmuxhttpstream.NewRoundTripper(nil)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(g.srv.URL + "/api/v1/namespaces/default/pods/web-0/attach?container=app&stdin=true&stdout=true")
	ex, err := remotecommand.NewSPDYExecutorForTransports(transport.NewBearerAuthRoundTripper(callerToken, rt), rt, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("attached"), Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	if out.String() != "attached" {
		t.Fatalf("stdout %q", out.String())
	}
	if v := ops.Value(g.g.Metrics().Upgrades.WithLabelValues("wsmux", "attach")); v != 1 {
		t.Errorf("wsmux attach upgrades = %v", v)
	}
}

// TestGracefulShutdownDrainsExec: SIGTERM's path while an exec runs: new
// connections are refused, /healthz turns 503, the running exec completes
// with all its output, then Serve returns.
func TestGracefulShutdownDrainsExec(t *testing.T) {
	cl := clustertest.Start(t)
	g, err := New(Config{Auth: auth.New([]string{callerToken}, nil), Cluster: cl.RestConfig(),
		Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil))})
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
		served <- ops.Serve(ctx, ln, g.Handler(), ops.ServerOptions{ShutdownTimeout: 20 * time.Second, Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil))}, g.Metrics().Sessions, g.Health())
	}()
	o := kubeclient.Options{Server: "http://" + ln.Addr().String(), Token: callerToken}
	pr, pw := io.Pipe()
	var out testnet.Buffer
	execDone := make(chan error, 1)
	go func() {
		execDone <- kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
			Namespace: "default", Pod: "web-0", Command: []string{"cat"}, Stdin: pr, Stdout: &out, Stderr: io.Discard,
		})
	}()
	pw.Write([]byte("before "))
	waitFor(t, func() bool { return out.String() == "before " })
	stop()
	waitFor(t, func() bool { return g.Health().Stopping() })
	waitFor(t, func() bool { // the listener is closed: no new sessions
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			c.Close()
		}
		return err != nil
	})
	select {
	case err := <-served:
		t.Fatalf("Serve returned (%v) with an exec running", err)
	case <-time.After(200 * time.Millisecond):
	}
	pw.Write([]byte("after"))
	pw.Close()
	if err := <-execDone; err != nil || out.String() != "before after" {
		t.Fatalf("exec across shutdown: %q, %v", out.String(), err)
	}
	select {
	case err := <-served:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the exec ended")
	}
}

// serveGateway serves g on a test server that closes, and drains g's
// sessions, when the test ends.
func serveGateway(t testing.TB, g *Gateway) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(g.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	return srv
}
