//go:build unix

package gateway

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/internal/testnet"
)

// nginxConf: TLS in front, a WebSocket-only reverse proxy to the gateway
// (the common production configuration: Upgrade and Connection are set
// only for "Upgrade: websocket", so SPDY upgrades arrive as plain POSTs).
const nginxConf = `{{user}}
worker_processes 1;
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
	map $http_upgrade $ws_upgrade { default ""; "~*^websocket$" websocket; }
	map $http_upgrade $ws_connection { default close; "~*^websocket$" upgrade; }
	server {
		listen 127.0.0.1:{{port}} ssl;
		ssl_certificate {{dir}}/tls.crt;
		ssl_certificate_key {{dir}}/tls.key;
		location / {
			proxy_pass http://{{upstream}};
			proxy_http_version 1.1;
			proxy_set_header Upgrade $ws_upgrade;
			proxy_set_header Connection $ws_connection;
			proxy_buffering off;
			proxy_request_buffering off;
			proxy_read_timeout 1h;
			proxy_send_timeout 1h;
		}
	}
}
`

// startNginxTLS runs nginx with TLS on a free loopback port in front of
// upstream and returns its https URL and the PEM file of its CA.
func startNginxTLS(t *testing.T, upstream string) (string, string) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		msg := "nginx is not on PATH: this test runs a real nginx as a WebSocket-only reverse proxy; scripts/ci-nginx.sh installs it (.ci/run does)"
		if ci := os.Getenv("CI"); ci != "" && ci != "false" && ci != "0" {
			t.Fatal("CI is set, so nginx must be installed: " + msg)
		}
		t.Skip(msg)
	}
	dir := t.TempDir()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "nginx"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	kb, _ := x509.MarshalECPrivateKey(key)
	os.WriteFile(filepath.Join(dir, "tls.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600)
	for attempt := 0; ; attempt++ {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		user := ""
		if os.Geteuid() == 0 {
			user = "user root;"
		}
		conf := strings.NewReplacer("{{user}}", user, "{{dir}}", dir, "{{port}}", fmt.Sprint(port), "{{upstream}}", upstream).Replace(nginxConf)
		confPath := filepath.Join(dir, "nginx.conf")
		os.WriteFile(confPath, []byte(conf), 0o644)
		stderr, _ := os.Create(filepath.Join(dir, "stderr.log"))
		cmd := exec.Command(bin, "-p", dir, "-c", confPath, "-e", filepath.Join(dir, "error.log"), "-g", "daemon off;")
		cmd.Stdout, cmd.Stderr = stderr, stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		stderr.Close()
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		// Ready when it accepts connections (or exited: a lost port race).
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ready := false
		for deadline := time.Now().Add(10 * time.Second); !ready && time.Now().Before(deadline); {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				ready = true
				break
			}
			select {
			case <-exited:
				deadline = time.Time{}
			case <-time.After(20 * time.Millisecond):
			}
		}
		if ready {
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				select {
				case <-exited:
				case <-time.After(10 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-exited
				}
			})
			return "https://" + addr, filepath.Join(dir, "tls.crt")
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
		if attempt == 2 {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx did not start:\n%s", b)
		}
	}
}

// TestKubectlThroughNginx: kubectl's WebSocket exec, cp and port-forward
// pass a WebSocket-only nginx in front of the gateway; SPDY does not.
func TestKubectlThroughNginx(t *testing.T) {
	cl := clustertest.Start(t)
	cl.SetRBAC(map[string][]string{"alice": {"a"}})
	cl.Dir = t.TempDir()
	toks, _ := auth.ParseTokens("tokens", []byte(tokenFile))
	g, err := New(Config{Auth: auth.NewWithUsers(toks, nil), Impersonate: true, Cluster: cl.RestConfig(),
		Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	url, ca := startNginxTLS(t, strings.TrimPrefix(srv.URL, "http://"))
	caPEM, err := os.ReadFile(ca)
	if err != nil {
		t.Fatal(err)
	}
	e := &kubectlEnv{gw: &gw{g: g, srv: srv, cl: cl}, k: testnet.NewKubectl(t, url, caPEM)}

	out, errOut, code := e.k.Run(t, "alice-token", wsOn, strings.NewReader("through nginx"), "exec", "-i", "-n", "a", "web-0", "--", "cat")
	if code != 0 || out != "through nginx" {
		t.Fatalf("websocket exec through nginx: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	data := make([]byte, 8<<20)
	rand.Read(data)
	local := filepath.Join(e.k.Home, "up.bin")
	os.WriteFile(local, data, 0o600)
	remote := filepath.Join(cl.Dir, "up.bin")
	if _, errOut, code := e.k.Run(t, "alice-token", wsOn, nil, "cp", local, "a/web-0:"+remote); code != 0 {
		t.Fatalf("cp through nginx: exit %d, %s", code, errOut)
	}
	if got, _ := os.ReadFile(remote); sum(got) != sum(data) {
		t.Fatalf("cp through nginx: %d bytes, sha256 differs", len(got))
	}
	addrs, stop := e.portForward(t, wsOn, "-n", "a", "pod/web-0", ":8080")
	for i := range 4 {
		if err := testnet.EchoThrough(addrs[0], 1<<20); err != nil {
			t.Errorf("port-forward %d through nginx: %v", i, err)
		}
	}
	stop()
	// SPDY upgrades do not pass this proxy: kubectl fails.
	_, errOut, code = e.k.Run(t, "alice-token", spdyOnly, nil, "exec", "-n", "a", "web-0", "--", "cat")
	if code != 1 || !strings.Contains(errOut, "a proxy on the way dropped its Upgrade header") {
		t.Fatalf("SPDY exec through a WebSocket-only nginx: exit %d, stderr %q; want 1 and the gateway's reason", code, errOut)
	}
	t.Logf("kubectl with SPDY through nginx: exit %d: %s", code, strings.TrimSpace(errOut))
	if e.upgrades("spdy", "exec") != 0 {
		t.Errorf("a SPDY upgrade reached the gateway through nginx")
	}
}
