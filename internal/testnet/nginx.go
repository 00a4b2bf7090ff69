package testnet

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Nginx is a real nginx run by a test (plain HTTP on loopback), which the
// test may reload (`nginx -s reload`) and restart.
type Nginx struct {
	Addr string // host:port it listens on

	bin, dir, conf string
	cmd            *exec.Cmd
	exited         chan struct{}
}

// nginxConf is a WebSocket reverse proxy; {{proxy}} holds the test's
// proxy_* directives (timeouts).
const nginxConf = `{{user}}
worker_processes 1;
worker_shutdown_timeout 1s;
pid {{dir}}/nginx.pid;
error_log {{dir}}/error.log info;
events { worker_connections 256; }
http {
	access_log {{dir}}/access.log;
	client_body_temp_path {{dir}}/client_body;
	proxy_temp_path {{dir}}/proxy;
	fastcgi_temp_path {{dir}}/fastcgi;
	uwsgi_temp_path {{dir}}/uwsgi;
	scgi_temp_path {{dir}}/scgi;
	{{http}}
	map $http_upgrade $ws_connection { default close; "~*^websocket$" upgrade; }
	server {
		listen {{addr}};
		location / {
			proxy_pass http://{{upstream}};
			proxy_http_version 1.1;
			proxy_set_header Upgrade $http_upgrade;
			proxy_set_header Connection $ws_connection;
			proxy_buffering off;
			proxy_request_buffering off;
			{{proxy}}
		}
	}
}
`

// StartNginx runs nginx on a free loopback port in front of upstream
// (host:port) with the given proxy_* directives, for instance
// "proxy_read_timeout 2s;". worker_shutdown_timeout is 1 s, so a reload
// ends the old worker's connections a second later, as a rolled proxy
// does. Without nginx on PATH the test is skipped, or fails when CI is set
// (.ci/run installs it).
func StartNginx(t *testing.T, upstream, proxy string) *Nginx {
	t.Helper()
	return startNginx(t, "", upstream, proxy)
}

// StartNginxRoundRobin is StartNginx in front of several upstreams, which
// nginx takes in turn (round-robin, its default); one that refuses the
// connection is skipped (proxy_next_upstream's default) and left out for
// 10 s.
func StartNginxRoundRobin(t *testing.T, upstreams []string, proxy string) *Nginx {
	t.Helper()
	var b strings.Builder
	b.WriteString("upstream wsmux_fleet {")
	for _, u := range upstreams {
		b.WriteString(" server " + u + ";")
	}
	b.WriteString(" }")
	return startNginx(t, b.String(), "wsmux_fleet", proxy)
}

func startNginx(t *testing.T, httpBlock, upstream, proxy string) *Nginx {
	t.Helper()
	bin := Program(t, "nginx", "this test runs a real nginx as a reverse proxy; scripts/ci-nginx.sh installs it (.ci/run does)")
	n := &Nginx{bin: bin, dir: t.TempDir()}
	user := ""
	if os.Geteuid() == 0 {
		user = "user root;"
	}
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		n.Addr = ln.Addr().String()
		_ = ln.Close()
		conf := strings.NewReplacer("{{user}}", user, "{{dir}}", n.dir, "{{addr}}", n.Addr, "{{upstream}}", upstream,
			"{{proxy}}", proxy, "{{http}}", httpBlock).Replace(nginxConf)
		n.conf = filepath.Join(n.dir, "nginx.conf")
		if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		if n.start(t) {
			break
		}
		if attempt == 2 {
			b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
			t.Fatalf("nginx did not start:\n%s", b)
		}
	}
	t.Cleanup(n.stop)
	return n
}

// start runs nginx and waits until it accepts connections; false if it
// exited first (the port was taken meanwhile).
func (n *Nginx) start(t *testing.T) bool {
	t.Helper()
	stderr, err := os.Create(filepath.Join(n.dir, "stderr.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-e", filepath.Join(n.dir, "error.log"), "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	newProcessGroup(cmd)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if c, err := net.DialTimeout("tcp", n.Addr, time.Second); err == nil {
			_ = c.Close()
			n.cmd, n.exited = cmd, exited
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	killGroup(cmd.Process)
	<-exited
	return false
}

// stop ends nginx (SIGTERM: a fast shutdown that closes every
// connection), and kills it if it lingers.
func (n *Nginx) stop() {
	if n.cmd == nil {
		return
	}
	terminateGroup(n.cmd.Process)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
		killGroup(n.cmd.Process)
		<-n.exited
	}
	n.cmd = nil
}

// Reload runs `nginx -s reload`: new workers take the new connections and
// the old one closes its connections after worker_shutdown_timeout.
func (n *Nginx) Reload(t *testing.T) {
	t.Helper()
	out, err := exec.Command(n.bin, "-p", n.dir, "-c", n.conf, "-s", "reload").CombinedOutput()
	if err != nil {
		t.Fatalf("nginx -s reload: %v: %s", err, out)
	}
}

// Stop stops nginx; Start starts it again on the same address.
func (n *Nginx) Stop() { n.stop() }

// Start starts a stopped nginx again on the same address.
func (n *Nginx) Start(t *testing.T) {
	t.Helper()
	if !n.start(t) {
		b, _ := os.ReadFile(filepath.Join(n.dir, "error.log"))
		t.Fatalf("nginx did not start again on %s:\n%s", n.Addr, b)
	}
}
