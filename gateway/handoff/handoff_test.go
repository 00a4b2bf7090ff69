//go:build linux

package handoff

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	neturl "net/url"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"

	"github.com/wsmux/wsmux/controller"
	"github.com/wsmux/wsmux/gateway"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

func TestMain(m *testing.M) { leakcheck.VerifyTestMain(m, testnet.IgnoredGoroutines()...) }

type env struct {
	g    *gateway.Gateway
	s    *Server
	cl   *clustertest.Cluster
	logs *testnet.Buffer
	// ctl is a Go controller (controller.HandoffHTTP) in front of the
	// gateway: it takes "Bearer ctl-token" as alice (group dev).
	ctl *httptest.Server
}

const ctlToken = "ctl-token"

func start(t *testing.T, mod func(*Config)) *env {
	t.Helper()
	cl := clustertest.Start(t)
	logs := &testnet.Buffer{}
	log := slog.New(slog.NewTextHandler(io.MultiWriter(logs, testnet.LogWriter{T: t}), nil))
	g, err := gateway.New(gateway.Config{Auth: auth.New(nil, nil), Impersonate: true, Cluster: cl.RestConfig(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Path: filepath.Join(t.TempDir(), "handoff.sock"), ServeAs: g.ServeAs, Metrics: g.Metrics(), Logger: log}
	if mod != nil {
		mod(&cfg)
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve() }()
	api := apiProxy(t, cl)
	ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+ctlToken {
			http.Error(w, "controller: unauthorized", http.StatusUnauthorized)
			return
		}
		tg, ok := controller.TargetFromRequest(r)
		if !ok || r.Header.Get("Upgrade") == "" {
			// What kubectl asks before a stream (discovery, the pod):
			// the controller's own proxy, not the gateway's business.
			api.ServeHTTP(w, r)
			return
		}
		if err := controller.HandoffHTTP(w, r, cfg.Path, controller.User{Name: "alice", Groups: []string{"dev"}}, tg); err != nil {
			t.Logf("controller: handoff: %v", err)
		}
	}))
	t.Cleanup(func() {
		ctl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
		if err := s.Close(); err != nil {
			t.Error(err)
		}
		if err := <-done; err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(cfg.Path); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket file left behind: %v", err)
		}
	})
	return &env{g: g, s: s, cl: cl, logs: logs, ctl: ctl}
}

func (e *env) metric(t *testing.T, want ...string) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.g.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, w := range want {
		if !strings.Contains(rec.Body.String(), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

func execCat(t testing.TB, server string, size int) error {
	t.Helper()
	data := make([]byte, size)
	rand.Read(data)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := kubeclient.Exec(ctx, kubeclient.Options{Server: server, Token: ctlToken}, kubeclient.ExecOptions{
		Namespace: "default", Pod: "web-0", Command: []string{"cat"}, Stdin: bytes.NewReader(data), Stdout: &out, Stderr: io.Discard,
	})
	if err == nil && sha256.Sum256(out.Bytes()) != sha256.Sum256(data) {
		t.Fatalf("stdout: %d bytes, differs from the %d sent", out.Len(), len(data))
	}
	return err
}

// TestHandoffProtocols: `wsmux exec`'s client (wsmux), client-go's v5
// WebSocket executor (kubectl's) and its SPDY executor, each through a
// Go controller that hands the socket off: the bytes come back, and the
// cluster sees the controller's caller, impersonated.
func TestHandoffProtocols(t *testing.T) {
	e := start(t, nil)
	if err := execCat(t, e.ctl.URL, 1<<20); err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: e.ctl.URL, BearerToken: ctlToken}
	url := e.ctl.URL + "/api/v1/namespaces/default/pods/web-0/exec?command=cat&stdin=true&stdout=true&stderr=true"
	ws, err := remotecommand.NewWebSocketExecutor(cfg, "GET", url)
	if err != nil {
		t.Fatal(err)
	}
	spdy, err := remotecommand.NewSPDYExecutor(cfg, "POST", mustParse(t, url))
	if err != nil {
		t.Fatal(err)
	}
	for name, ex := range map[string]remotecommand.Executor{"v5": ws, "spdy": spdy} {
		data := make([]byte, 512<<10)
		rand.Read(data)
		var out bytes.Buffer
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: bytes.NewReader(data), Stdout: &out, Stderr: io.Discard})
		cancel()
		if err != nil || !bytes.Equal(out.Bytes(), data) {
			t.Errorf("%s: %d of %d bytes back, %v", name, out.Len(), len(data), err)
		}
	}
	imps := e.cl.Impersonations()
	if len(imps) != 3 {
		t.Fatalf("%d upstream requests, want 3", len(imps))
	}
	for _, im := range imps {
		if im.User != "alice" || strings.Join(im.Groups, ",") != "dev" || im.Path != "/api/v1/namespaces/default/pods/web-0/exec" {
			t.Errorf("upstream %+v, want alice (dev) on web-0's exec", im)
		}
	}
	e.metric(t, `wsmux_handoffs_total{result="accepted"}`, `wsmux_upgrades_total{kind="exec",protocol="wsmux"} 1`,
		`wsmux_upgrades_total{kind="exec",protocol="spdy"} 1`)
	if !strings.Contains(e.logs.String(), "caller=handoff:alice") {
		t.Error("no session logged as caller handoff:alice")
	}
}

func mustParse(t *testing.T, s string) *neturl.URL {
	u, err := neturl.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// tcpPair returns a connected pair: the client's end and the end a
// controller accepted.
func tcpPair(t testing.TB) (net.Conn, *net.TCPConn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	s, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); s.Close() })
	return c, s.(*net.TCPConn)
}

// fileOf returns a duplicate descriptor of c (closed at cleanup).
func fileOf(t testing.TB, c interface{ File() (*os.File, error) }) *os.File {
	t.Helper()
	f, err := c.File()
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// sendRaw sends one message with the descriptors over a new control
// connection and returns the gateway's reply ("" reason and ok false
// with err if it closed the connection).
func sendRaw(t testing.TB, path string, js []byte, fds ...int) (controller.HandoffReply, error) {
	t.Helper()
	c, err := net.Dial("unixpacket", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	uc := c.(*net.UnixConn)
	_ = uc.SetDeadline(time.Now().Add(10 * time.Second)) // a hang guard, not a bound on anything
	var oob []byte
	if len(fds) > 0 {
		oob = syscall.UnixRights(fds...)
	}
	if _, _, err := uc.WriteMsgUnix(js, oob, nil); err != nil {
		return controller.HandoffReply{}, err
	}
	buf := make([]byte, 4096)
	n, err := uc.Read(buf)
	if err != nil {
		return controller.HandoffReply{}, err
	}
	if n == 0 {
		return controller.HandoffReply{}, io.EOF
	}
	var r controller.HandoffReply
	if err := json.Unmarshal(buf[:n], &r); err != nil {
		t.Fatalf("reply %q: %v", buf[:n], err)
	}
	return r, nil
}

func message(t testing.TB, mod func(*controller.HandoffMessage)) []byte {
	m := controller.HandoffMessage{V: 1, User: controller.User{Name: "alice"},
		Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "exec", Command: []string{"cat"}},
		Data:   []byte("GET /run HTTP/1.1\r\nHost: x\r\n\r\n")}
	if mod != nil {
		mod(&m)
	}
	js, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// expectEOF checks the client's end sees the connection closed: no
// copy of the handed-off socket is left open anywhere.
func expectEOF(t testing.TB, c net.Conn) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second)) // a hang guard
	b, err := io.ReadAll(c)
	if err != nil {
		t.Errorf("client end: %v after %q, want EOF (a copy of the socket is still open)", err, b)
	}
}

// TestHandoffRefusals: each malformed handoff gets a reply with its
// reason, a log line and a count, and every descriptor it carried is
// closed (the client's end sees EOF once the sender closed its copy).
func TestHandoffRefusals(t *testing.T) {
	e := start(t, nil)
	type tc struct {
		name   string
		js     []byte
		nfds   int
		reason string
	}
	valid := message(t, nil)
	cases := []tc{
		{"malformed JSON", []byte(`{"v":1,"user":`), 1, ResultBadMessage},
		{"JSON then more", append(append([]byte{}, valid...), ' ', '{', '}'), 1, ResultBadMessage},
		{"unknown field", bytes.Replace(valid, []byte(`{"v":1`), []byte(`{"v":1,"admin":true`), 1), 1, ResultBadMessage},
		{"version 2", message(t, func(m *controller.HandoffMessage) { m.V = 2 }), 1, ResultBadMessage},
		{"no user", message(t, func(m *controller.HandoffMessage) { m.User.Name = "" }), 1, ResultBadMessage},
		{"exec without a command", message(t, func(m *controller.HandoffMessage) { m.Target.Command = nil }), 1, ResultBadMessage},
		{"pod name with a slash", message(t, func(m *controller.HandoffMessage) { m.Target.Pod = "web-0/exec?x" }), 1, ResultBadMessage},
		{"no descriptor", valid, 0, ResultNoDescriptor},
		{"two descriptors", valid, 2, ResultExtraDescriptors},
		{"control data truncated", valid, 20, ResultTruncated},
		{"message over the limit", message(t, func(m *controller.HandoffMessage) { m.Data = make([]byte, controller.MaxHandoffMessage) }), 1, ResultTruncated},
		{"TLS bytes", message(t, func(m *controller.HandoffMessage) { m.Data = []byte{0x16, 0x03, 0x01, 0x02, 0x00} }), 1, ResultTLS},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			var clients []net.Conn
			var fds []int
			for range min(c.nfds, 2) {
				cl, srv := tcpPair(t)
				f := fileOf(t, srv)
				srv.Close()
				defer f.Close()
				clients = append(clients, cl)
				fds = append(fds, int(f.Fd()))
			}
			for len(fds) < c.nfds {
				fds = append(fds, fds[0]) // the same socket many times
			}
			r, err := sendRaw(t, e.s.Addr(), c.js, fds...)
			if err != nil || r.OK || r.Reason != c.reason || r.Error == "" {
				t.Fatalf("reply %+v, %v; want reason %s", r, err, c.reason)
			}
			for _, f := range fds[:min(len(fds), 2)] {
				syscall.Close(f) // our copies (the *os.File's close is then a no-op error)
			}
			for _, cl := range clients {
				expectEOF(t, cl)
			}
		})
	}
	// Descriptors that are not a client's connected socket.
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pw.Close()
	r, err := sendRaw(t, e.s.Addr(), valid, int(pr.Fd()))
	pr.Close()
	if err != nil || r.Reason != ResultBadDescriptor {
		t.Fatalf("a pipe: %+v %v", r, err)
	}
	if _, err := pw.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Errorf("pipe's write end after the refusal: %v, want EPIPE (the gateway kept the read end)", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lf := fileOf(t, ln.(*net.TCPListener))
	r, err = sendRaw(t, e.s.Addr(), valid, int(lf.Fd()))
	lf.Close()
	ln.Close()
	if err != nil || r.Reason != ResultBadDescriptor {
		t.Fatalf("a listening socket: %+v %v", r, err)
	}
	if c, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c.Close()
		t.Error("the listening socket still accepts: the gateway kept a copy")
	}
	e.metric(t, `wsmux_handoffs_total{result="bad_message"} 7`, `wsmux_handoffs_total{result="no_descriptor"} 1`,
		`wsmux_handoffs_total{result="extra_descriptors"} 1`, `wsmux_handoffs_total{result="truncated"} 2`,
		`wsmux_handoffs_total{result="tls"} 1`, `wsmux_handoffs_total{result="bad_descriptor"} 2`,
		`wsmux_handoffs_total{result="accepted"} 0`)
	for _, c := range cases {
		if !strings.Contains(e.logs.String(), "reason="+c.reason) {
			t.Errorf("no log line with reason=%s", c.reason)
		}
	}
	if !strings.Contains(e.logs.String(), "everything received was closed") {
		t.Error("refusals do not say what became of the descriptors")
	}
}

// TestHandoffPeerNotAllowed: a controller whose uid is not allowed is
// disconnected before anything is read; the socket it sent is closed.
func TestHandoffPeerNotAllowed(t *testing.T) {
	e := start(t, func(c *Config) { c.AllowUIDs = []int{os.Getuid() + 1} })
	cl, srv := tcpPair(t)
	f := fileOf(t, srv)
	srv.Close()
	r, err := sendRaw(t, e.s.Addr(), message(t, nil), int(f.Fd()))
	f.Close()
	if err == nil {
		t.Fatalf("a disallowed uid got a reply: %+v", r)
	}
	expectEOF(t, cl)
	e.metric(t, `wsmux_handoffs_total{result="peer_not_allowed"} 1`, `wsmux_handoffs_total{result="accepted"} 0`)
	if !strings.Contains(e.logs.String(), "its uid is not allowed") {
		t.Error("no log line for the refused peer")
	}
	var he *controller.HandoffError
	cl2, srv2 := tcpPair(t)
	defer cl2.Close()
	if err := controller.Handoff(context.Background(), e.s.Addr(), srv2, controller.HandoffMessage{User: controller.User{Name: "a"},
		Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "attach"}}); !errors.As(err, &he) || he.Reason != controller.HandoffClosed {
		t.Errorf("Go helper from a disallowed uid: %v, want a closed connection", err)
	}
}

// TestHandoffShuttingDown: while the gateway stops, handoffs are refused
// and closed.
func TestHandoffShuttingDown(t *testing.T) {
	e := start(t, func(c *Config) { c.Stopping = func() bool { return true } })
	cl, srv := tcpPair(t)
	var he *controller.HandoffError
	err := controller.Handoff(context.Background(), e.s.Addr(), srv, controller.HandoffMessage{User: controller.User{Name: "a"},
		Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "attach"}})
	srv.Close()
	if !errors.As(err, &he) || he.Reason != ResultShuttingDown {
		t.Fatalf("%v, want shutting_down", err)
	}
	expectEOF(t, cl)
}

// TestHandoffReadHeaderTimeout: a handed-off client that never finishes
// its request head is closed after ReadHeaderTimeout.
func TestHandoffReadHeaderTimeout(t *testing.T) {
	e := start(t, func(c *Config) { c.ReadHeaderTimeout = 50 * time.Millisecond })
	cl, srv := tcpPair(t)
	err := controller.Handoff(context.Background(), e.s.Addr(), srv, controller.HandoffMessage{User: controller.User{Name: "a"},
		Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "attach"}, Data: []byte("GET / HTTP/1.1\r\nHost")})
	srv.Close()
	if err != nil {
		t.Fatal(err)
	}
	expectEOF(t, cl)
}

func countFDs(t testing.TB) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	return len(ents)
}

// TestHandoff500 hands off 500 sockets in a row, mixed: real exec
// sessions, clients that send something else than an upgrade or close at
// once, and refused messages. The process's descriptors and goroutines
// are the same afterwards (within a small slack for the runtime's own).
func TestHandoff500(t *testing.T) {
	e := start(t, nil)
	round := func(i int) {
		switch i % 5 {
		case 0: // a real session through the Go controller
			if err := execCat(t, e.ctl.URL, 1024); err != nil {
				t.Fatalf("handoff %d: %v", i, err)
			}
		case 1, 2: // accepted; the client asks for something else, or hangs up
			cl, srv := tcpPair(t)
			data := []byte("GET /x HTTP/1.1\r\nHost: c\r\n\r\n")
			if i%5 == 2 {
				data = nil
				cl.Close()
			}
			if err := controller.Handoff(context.Background(), e.s.Addr(), srv, controller.HandoffMessage{User: controller.User{Name: "a"},
				Target: controller.Target{Namespace: "default", Pod: "web-0", Subresource: "attach"}, Data: data}); err != nil {
				t.Fatalf("handoff %d: %v", i, err)
			}
			srv.Close()
			if data != nil {
				b, _ := io.ReadAll(cl)
				if !bytes.HasPrefix(b, []byte("HTTP/1.1 400")) {
					t.Fatalf("handoff %d: %q, want 400", i, b)
				}
			}
			cl.Close()
		case 3, 4: // refused: bad JSON, two descriptors
			cl, srv := tcpPair(t)
			f := fileOf(t, srv)
			srv.Close()
			js, fds := []byte("{"), []int{int(f.Fd())}
			if i%5 == 4 {
				js, fds = message(t, nil), []int{int(f.Fd()), int(f.Fd())}
			}
			if r, err := sendRaw(t, e.s.Addr(), js, fds...); err != nil || r.OK {
				t.Fatalf("handoff %d: %+v %v", i, r, err)
			}
			f.Close()
			expectEOF(t, cl)
			cl.Close()
		}
	}
	settle := func() (int, int) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := e.s.WaitIdle(ctx); err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		return countFDs(t), runtime.NumGoroutine()
	}
	for i := range 25 {
		round(i)
	}
	fd0, g0 := settle()
	for i := range 500 {
		round(i)
	}
	fd1, g1 := settle()
	t.Logf("after 25 handoffs: %d descriptors, %d goroutines; after 500 more: %d, %d", fd0, g0, fd1, g1)
	if fd1 > fd0+8 || g1 > g0+16 {
		var b strings.Builder
		pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Errorf("500 handoffs: descriptors %d -> %d, goroutines %d -> %d: something leaks; goroutines:\n%s", fd0, fd1, g0, g1, b.String())
	}
	e.metric(t, `wsmux_handoffs_total{result="accepted"} 315`, `wsmux_handoffs_total{result="bad_message"} 105`,
		`wsmux_handoffs_total{result="extra_descriptors"} 105`)
}

// TestListenPath: a stale socket file is replaced; a path another
// process listens on, or a file that is not a socket, is an error.
func TestListenPath(t *testing.T) {
	e := start(t, nil)
	cfg := func(p string) Config {
		return Config{Path: p, ServeAs: e.g.ServeAs, Metrics: ops.NewMetrics()}
	}
	if _, err := Listen(cfg(e.s.Addr())); err == nil || !strings.Contains(err.Error(), "another process listens") {
		t.Errorf("in use: %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, []byte("keep me"), 0o600)
	if _, err := Listen(cfg(file)); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("a regular file: %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep me" {
		t.Error("the file was replaced")
	}
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: stale, Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	l.Close()
	s, err := Listen(cfg(stale))
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	if fi, err := os.Stat(stale); err != nil || fi.Mode().Perm() != 0o666 {
		t.Errorf("socket mode %v, %v", fi.Mode(), err)
	}
	go s.Serve()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
