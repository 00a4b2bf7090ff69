package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/wsmux/wsmux/adapters/bridge"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

func (e *kubectlEnv) restConfig(token string) *rest.Config {
	return &rest.Config{Host: e.srv.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAFile: e.k.CA}}
}

// TestClientGoWebSocketExecutor: client-go's own v5 WebSocket executor
// (what kubectl uses) through the gateway: stdin to stdout with stdin's
// close, stderr, exit codes, a TTY with resizes, and a refusal.
func TestClientGoWebSocketExecutor(t *testing.T) {
	e := startForKubectl(t)
	exec := func(token, ns, query string, o remotecommand.StreamOptions) error {
		ex, err := remotecommand.NewWebSocketExecutor(e.restConfig(token), "GET", e.srv.URL+"/api/v1/namespaces/"+ns+"/pods/web-0/exec?"+query)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		return ex.StreamWithContext(ctx, o)
	}
	data := make([]byte, 8<<20)
	rand.Read(data)
	var out, errb bytes.Buffer
	if err := exec("alice-token", "a", "command=cat&stdin=true&stdout=true&stderr=true",
		remotecommand.StreamOptions{Stdin: bytes.NewReader(data), Stdout: &out, Stderr: &errb}); err != nil {
		t.Fatal(err)
	}
	if sum(out.Bytes()) != sum(data) {
		t.Fatalf("cat: %d bytes back of %d", out.Len(), len(data))
	}
	out.Reset()
	q := url.Values{"command": {"sh", "-c", "echo o; echo e >&2; exit 5"}, "stdout": {"true"}, "stderr": {"true"}}
	err := exec("alice-token", "a", q.Encode(),
		remotecommand.StreamOptions{Stdout: &out, Stderr: &errb})
	var ee utilexec.ExitError
	if !errors.As(err, &ee) || ee.ExitStatus() != 5 || out.String() != "o\n" || errb.String() != "e\n" {
		t.Fatalf("exit 5: %v, stdout %q, stderr %q", err, out.String(), errb.String())
	}
	sz := sizes{ch: make(chan *remotecommand.TerminalSize, 2)}
	sz.ch <- &remotecommand.TerminalSize{Width: 120, Height: 40}
	pr, pw := io.Pipe()
	tout := &notifyWriter{want: "size", seen: make(chan struct{})}
	go func() {
		// Type once the size has been seen; then end stdin.
		<-tout.seen
		pw.Write([]byte("typed"))
		pw.Close()
	}()
	err = exec("alice-token", "a", "command=tty&stdin=true&stdout=true&tty=true",
		remotecommand.StreamOptions{Stdin: pr, Stdout: tout, Tty: true, TerminalSizeQueue: sz})
	close(sz.ch)
	if err != nil || tout.String() != "size 120x40\ntyped" {
		t.Fatalf("tty: %v, stdout %q", err, tout.String())
	}
	err = exec("bob-token", "a", "command=cat&stdout=true", remotecommand.StreamOptions{Stdout: &out})
	if err == nil || !strings.Contains(err.Error(), `User "bob" cannot`) {
		t.Fatalf("bob: %v, want the cluster's 403", err)
	}
}

// notifyWriter closes seen once what was written contains want.
type notifyWriter struct {
	mu   sync.Mutex
	b    bytes.Buffer
	want string
	seen chan struct{}
	once sync.Once
	w    io.Writer // also written to, when set
}

func (w *notifyWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	if w.w != nil {
		w.w.Write(p)
	}
	return len(p), nil
}

func (w *notifyWriter) String() string { w.mu.Lock(); defer w.mu.Unlock(); return w.b.String() }

// TestClientGoTunnelingPortForward: client-go's SPDY-over-WebSocket
// port-forward dialer (what kubectl uses) through the gateway.
func TestClientGoTunnelingPortForward(t *testing.T) {
	e := startForKubectl(t)
	u, _ := url.Parse(e.srv.URL + "/api/v1/namespaces/a/pods/web-0/portforward")
	d, err := portforward.NewSPDYOverWebsocketDialer(u, e.restConfig("alice-token"))
	if err != nil {
		t.Fatal(err)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:8080", "0:9090"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward: %v", err)
	}
	ports, _ := pf.GetPorts()
	errs := make(chan error, 8)
	for i := range 8 {
		go func() { errs <- testnet.EchoThrough("127.0.0.1:"+strconv.Itoa(int(ports[i%2].Local)), 4<<20) }()
	}
	for range 8 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	close(stop)
	if err := <-done; err != nil {
		t.Errorf("port-forward ended with %v", err)
	}
}

// TestWebSocketClientsOverWsmuxUpstream: client-go's v5 executor and
// tunnelling port-forward in, wsmux to the cluster (through a wsmux-to-SPDY
// hop in front of the stand-in).
func TestWebSocketClientsOverWsmuxUpstream(t *testing.T) {
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
	cfg := &rest.Config{Host: srv.URL, BearerToken: callerToken}
	ex, err := remotecommand.NewWebSocketExecutor(cfg, "GET", srv.URL+"/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true")
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := ex.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdin: strings.NewReader("v5 over wsmux"), Stdout: &out}); err != nil || out.String() != "v5 over wsmux" {
		t.Fatalf("exec: %q, %v", out.String(), err)
	}
	pu, _ := url.Parse(srv.URL + "/api/v1/namespaces/default/pods/web-0/portforward")
	d, err := portforward.NewSPDYOverWebsocketDialer(pu, cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:8080"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward: %v", err)
	}
	ports, _ := pf.GetPorts()
	if err := testnet.EchoThrough("127.0.0.1:"+strconv.Itoa(int(ports[0].Local)), 1<<20); err != nil {
		t.Error(err)
	}
	close(stop)
	<-done
	if n, _ := cl.Stats(); n != 2 {
		t.Errorf("cluster saw %d upgrades, want 2", n)
	}
	if v := ops.Value(g.Metrics().Upgrades.WithLabelValues(ProtoWebSocket, "exec")); v != 1 {
		t.Errorf("websocket exec sessions %v", v)
	}
}
