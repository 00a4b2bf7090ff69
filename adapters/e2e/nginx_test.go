//go:build unix

package e2e_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsmux/wsmux/adapters/bridge"
	"github.com/wsmux/wsmux/adapters/e2e/internal/kubelettest"
	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"
)

// nginxViaHeader is set by the test's nginx on every proxied request, so the
// upstream can tell what came through nginx.
const nginxViaHeader = "X-Wsmux-Test-Via"

// nginxConf is a WebSocket-only reverse proxy, the common production
// configuration: the Upgrade and Connection headers are hop-by-hop, so nginx
// drops them unless told to set them, and this configuration sets them only
// for "Upgrade: websocket". Any other upgrade (SPDY/3.1) reaches the upstream
// as a plain request without Upgrade, which is how such proxies break SPDY.
const nginxConf = `# written by adapters/e2e/nginx_test.go
{{user}}
worker_processes 1;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log info;

events {
	worker_connections 256;
}

http {
	access_log {{dir}}/access.log;
	client_body_temp_path {{dir}}/client_body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;

	map $http_upgrade $ws_upgrade {
		default "";
		"~*^websocket$" websocket;
	}
	map $http_upgrade $ws_connection {
		default close;
		"~*^websocket$" upgrade;
	}

	server {
		listen 127.0.0.1:{{port}};

		location / {
			proxy_pass http://{{upstream}};
			proxy_http_version 1.1;
			proxy_set_header Upgrade $ws_upgrade;
			proxy_set_header Connection $ws_connection;
			proxy_set_header {{via}} nginx;
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_connect_timeout 10s;
			proxy_read_timeout 1h;
			proxy_send_timeout 1h;
		}
	}
}
`

// nginx is a running nginx master process of the test's own.
type nginx struct {
	addr string // 127.0.0.1:port it listens on
	dir  string // prefix: config, logs, pid file, temp paths
}

func (n *nginx) log(name string) string {
	b, err := os.ReadFile(filepath.Join(n.dir, name))
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}

// lookNginx finds nginx on PATH. Without it the test skips, except in CI
// (CI set), where .ci/run must have installed it.
func lookNginx(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("nginx")
	if err == nil {
		return p
	}
	msg := "nginx is not on PATH (" + err.Error() + "): this test runs a real nginx as a WebSocket-only reverse proxy; " +
		"install it with scripts/ci-nginx.sh (as root, from Debian's packages), which .ci/run does"
	if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
		t.Fatal("CI is set, so nginx must be installed: " + msg)
	}
	t.Skip(msg)
	return ""
}

// startNginx starts nginx in the foreground (daemon off), proxying
// 127.0.0.1:<free port> to upstream (host:port), and stops it, workers
// included, at t's cleanup.
func startNginx(t *testing.T, bin, upstream string) *nginx {
	t.Helper()
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		// A fresh prefix per attempt: a failed attempt's logs stay apart.
		dir, err := os.MkdirTemp(t.TempDir(), "nginx")
		if err != nil {
			t.Fatal(err)
		}
		n, err := tryStartNginx(t, bin, dir, upstream)
		if err == nil {
			return n
		}
		lastErr = err
		// Only a lost race for the free port is worth another try.
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	t.Fatalf("starting nginx: %v", lastErr)
	return nil
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func tryStartNginx(t *testing.T, bin, dir, upstream string) (*nginx, error) {
	port := freePort(t)
	user := ""
	if os.Geteuid() == 0 {
		// Workers would otherwise switch to nobody, who cannot enter the
		// test's 0700 temporary directory.
		user = "user root;"
	}
	conf := strings.NewReplacer(
		"{{user}}", user,
		"{{dir}}", dir,
		"{{port}}", fmt.Sprint(port),
		"{{upstream}}", upstream,
		"{{via}}", nginxViaHeader,
	).Replace(nginxConf)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	stderr, err := os.Create(filepath.Join(dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()

	cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = stderr, stderr // files: no copying goroutines
	// Its own process group, so that cleanup reaches the workers too.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	n := &nginx{addr: fmt.Sprintf("127.0.0.1:%d", port), dir: dir}
	pgid := cmd.Process.Pid

	stop := func() {
		// SIGTERM: fast shutdown, the master stops its workers and exits.
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("nginx did not exit within 10 s of SIGTERM; killing it\nerror.log:\n%s", n.log("error.log"))
			_ = cmd.Process.Kill()
			<-exited
		}
		// Any worker left behind (there should be none) goes with its group.
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
	}

	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", n.addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-exited:
			_ = syscall.Kill(-pgid, syscall.SIGKILL)
			return nil, fmt.Errorf("nginx exited (%v) before accepting on %s:\n%s%s", waitErr, n.addr, n.log("stderr.log"), n.log("error.log"))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("nginx did not accept on %s within 15 s:\n%s", n.addr, n.log("error.log"))
		}
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			t.Logf("nginx error.log:\n%s\naccess.log:\n%s", n.log("error.log"), n.log("access.log"))
		}
	})
	return n, nil
}

// seenRequest is a request as the upstream (behind nginx) received it.
type seenRequest struct {
	viaNginx                     bool
	method, path                 string
	upgrade, connection, version string
}

// nginxUpstream is what nginx proxies to: wsmux upgrades go to a
// wsmux->SPDY bridge in front of the kubelet, everything else (SPDY
// upgrades) to the kubelet itself through a byte-for-byte upgrade proxy, so
// both clients have a working server behind nginx.
type nginxUpstream struct {
	srv *httptest.Server

	mu      sync.Mutex
	seen    []seenRequest
	splices []*bridge.Splicer
}

func startNginxUpstream(t *testing.T, k *kubelettest.Kubelet) *nginxUpstream {
	t.Helper()
	base, _ := url.Parse(k.Server.URL)
	u := &nginxUpstream{}
	b := bridge.NewWsmuxToSPDY(base, nil)
	b.OnSplice = func(s *bridge.Splicer) { u.mu.Lock(); u.splices = append(u.splices, s); u.mu.Unlock() }
	direct := httputil.NewSingleHostReverseProxy(base)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u.mu.Lock()
		u.seen = append(u.seen, seenRequest{
			viaNginx:   r.Header.Get(nginxViaHeader) != "",
			method:     r.Method,
			path:       r.URL.Path,
			upgrade:    r.Header.Get("Upgrade"),
			connection: r.Header.Get("Connection"),
			version:    strings.Join(r.Header.Values(apihttpstream.HeaderProtocolVersion), ","),
		})
		u.mu.Unlock()
		if wsmuxhttpstream.IsWsmuxRequest(r) {
			b.ServeHTTP(w, r)
			return
		}
		direct.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

// mark returns the position to pass to since.
func (u *nginxUpstream) mark() int { u.mu.Lock(); defer u.mu.Unlock(); return len(u.seen) }

func (u *nginxUpstream) since(m int) []seenRequest {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]seenRequest(nil), u.seen[m:]...)
}

// bridgedStreams is how many streams the bridge spliced so far.
func (u *nginxUpstream) bridgedStreams() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, s := range u.splices {
		n += s.Streams()
	}
	return n
}

// withHost is u sent to host instead.
func withHost(u *url.URL, host string) *url.URL {
	out := *u
	out.Host = host
	return &out
}

// TestNginxWebSocketOnlyProxy runs client-go through a real nginx that
// proxies WebSocket upgrades only: exec and port-forward over wsmux pass
// (wsmux is a WebSocket), the same exec and port-forward over SPDY fail
// promptly, and SPDY straight to the same upstream works, so nginx is what
// breaks it.
func TestNginxWebSocketOnlyProxy(t *testing.T) {
	bin := lookNginx(t)
	k := kubelettest.Start(t)
	up := startNginxUpstream(t, k)
	ng := startNginx(t, bin, up.srv.Listener.Addr().String())
	t.Logf("%s listening on %s, proxying to %s", bin, ng.addr, up.srv.Listener.Addr())

	// requireWsmuxViaNginx checks that what just ran went through nginx as a
	// WebSocket upgrade and through the bridge.
	requireWsmuxViaNginx := func(t *testing.T, m, streamsBefore int) {
		t.Helper()
		reqs := up.since(m)
		if len(reqs) == 0 {
			t.Fatal("the upstream saw no request")
		}
		for _, r := range reqs {
			if !r.viaNginx || !strings.EqualFold(r.upgrade, "websocket") || !strings.Contains(strings.ToLower(r.connection), "upgrade") {
				t.Fatalf("upstream saw %+v, want a WebSocket upgrade through nginx", r)
			}
		}
		if n := up.bridgedStreams(); n <= streamsBefore {
			t.Fatalf("the bridge spliced %d streams, %d before: the wsmux path was not used", n, streamsBefore)
		}
	}

	t.Run("WsmuxExec", func(t *testing.T) {
		m, s := up.mark(), up.bridgedStreams()
		var out, errb bytes.Buffer
		u := withHost(k.ExecURL("cat; echo oops >&2", true, true, true, false), ng.addr)
		err := execStream(t, wsmuxClient, u, remotecommand.StreamOptions{
			Stdin: strings.NewReader("hello through nginx\n"), Stdout: &out, Stderr: &errb,
		})
		if err != nil {
			t.Fatalf("exec through nginx: %v", err)
		}
		// cat ends only once stdin's EOF (a half-close) reached it.
		if out.String() != "hello through nginx\n" || errb.String() != "oops\n" {
			t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
		}
		requireWsmuxViaNginx(t, m, s)
	})

	t.Run("WsmuxExecExitCode", func(t *testing.T) {
		m, s := up.mark(), up.bridgedStreams()
		var out bytes.Buffer
		u := withHost(k.ExecURL("echo last words; exit 42", false, true, false, false), ng.addr)
		err := execStream(t, wsmuxClient, u, remotecommand.StreamOptions{Stdout: &out})
		var ee clientexec.ExitError
		if !errors.As(err, &ee) || ee.ExitStatus() != 42 {
			t.Fatalf("err = %v (%T), want exit code 42", err, err)
		}
		if out.String() != "last words\n" {
			t.Fatalf("stdout %q", out.String())
		}
		requireWsmuxViaNginx(t, m, s)
	})

	t.Run("WsmuxPortForward4x4MiB", func(t *testing.T) {
		m, s := up.mark(), up.bridgedStreams()
		addr, stop, _ := startPortForward(t, wsmuxClient, withHost(k.PortForwardURL(), ng.addr))
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() { defer wg.Done(); errs <- echoThrough(addr, 4<<20) }()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err) // echoThrough compares sha256
			}
		}
		if err := stop(); err != nil {
			t.Fatalf("ForwardPorts: %v", err)
		}
		requireWsmuxViaNginx(t, m, s)
	})

	// The control: SPDY straight to the upstream nginx proxies to works.
	t.Run("SPDYExecWithoutNginx", func(t *testing.T) {
		var out bytes.Buffer
		u := withHost(k.ExecURL("echo spdy ok", false, true, false, false), up.srv.Listener.Addr().String())
		if err := execStream(t, spdyClient, u, remotecommand.StreamOptions{Stdout: &out}); err != nil {
			t.Fatalf("SPDY exec without nginx: %v", err)
		}
		if out.String() != "spdy ok\n" {
			t.Fatalf("stdout %q", out.String())
		}
	})

	// requireSPDYStripped checks that the SPDY request reached the upstream
	// through nginx without its upgrade: nginx, not the upstream, broke it.
	requireSPDYStripped := func(t *testing.T, m int) {
		t.Helper()
		reqs := up.since(m)
		if len(reqs) == 0 {
			t.Fatal("the SPDY request never reached the upstream")
		}
		for _, r := range reqs {
			if !r.viaNginx || r.upgrade != "" || strings.Contains(strings.ToLower(r.connection), "upgrade") {
				t.Fatalf("upstream saw %+v, want the request through nginx with its SPDY upgrade dropped", r)
			}
			if r.version == "" {
				t.Fatalf("upstream saw %+v: X-Stream-Protocol-Version (an end-to-end header) was lost too", r)
			}
		}
	}

	// requireNoUpgradeError checks the client's error: the kubelet answered
	// the plain request nginx sent it that it is no upgrade.
	requireNoUpgradeError := func(t *testing.T, err error) {
		t.Helper()
		if !strings.Contains(err.Error(), "missing upgrade headers") {
			t.Fatalf("err = %v (%T), want the kubelet's refusal of a request without upgrade headers", err, err)
		}
	}

	t.Run("SPDYExecThroughNginxFails", func(t *testing.T) {
		m := up.mark()
		rt, upg := spdyClient.new(t)
		u := withHost(k.ExecURL("echo must not run", false, true, false, false), ng.addr)
		ex, err := remotecommand.NewSPDYExecutorForTransports(rt, upg, spdyClient.method, u)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		var out bytes.Buffer
		start := time.Now()
		err = ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out})
		took := time.Since(start)
		if err == nil {
			t.Fatalf("SPDY exec through a WebSocket-only nginx succeeded (stdout %q)", out.String())
		}
		if errors.Is(err, context.DeadlineExceeded) || took > 10*time.Second {
			t.Fatalf("SPDY exec through nginx failed only after %v (%v): want a prompt failure", took, err)
		}
		requireNoUpgradeError(t, err)
		if out.Len() != 0 {
			t.Fatalf("stdout %q from a failed exec", out.String())
		}
		requireSPDYStripped(t, m)
		t.Logf("SPDY exec through nginx failed after %v: %v", took.Round(time.Millisecond), err)
	})

	t.Run("SPDYPortForwardThroughNginxFails", func(t *testing.T) {
		m := up.mark()
		rt, upg := spdyClient.new(t)
		dialer := clientspdy.NewDialer(upg, &http.Client{Transport: rt, Timeout: 15 * time.Second}, spdyClient.method,
			withHost(k.PortForwardURL(), ng.addr))
		start := time.Now()
		conn, proto, err := dialer.Dial("portforward.k8s.io")
		took := time.Since(start)
		if err == nil {
			conn.Close()
			t.Fatalf("SPDY port-forward through a WebSocket-only nginx connected (protocol %q)", proto)
		}
		if took > 10*time.Second {
			t.Fatalf("SPDY port-forward through nginx failed only after %v (%v): want a prompt failure", took, err)
		}
		requireNoUpgradeError(t, err)
		requireSPDYStripped(t, m)
		t.Logf("SPDY port-forward through nginx failed after %v: %v", took.Round(time.Millisecond), err)
	})
}
