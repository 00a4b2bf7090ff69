package testnet

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Redis is a real redis-server run by a test on loopback, with a password
// and an append-only file, which the test may stop and start again on the
// same port (what it had comes back from the file).
type Redis struct {
	Addr     string // host:port
	Password string

	// RootCAs, set by StartRedisTLS, trusts the server's certificate.
	RootCAs *x509.CertPool

	bin, dir string
	tlsArgs  []string // the server's TLS flags; nil: plain TCP
	cmd      *exec.Cmd
	exited   chan struct{}
}

// StartRedis runs redis-server on a free loopback port; t's cleanup stops
// it. Without redis-server on PATH (or in /usr/bin, /usr/sbin) the test
// is skipped, or fails when CI is set (.ci/run installs it:
// scripts/ci-redis.sh).
func StartRedis(t testing.TB) *Redis {
	t.Helper()
	return startRedis(t, false)
}

func startRedis(t testing.TB, withTLS bool) *Redis {
	t.Helper()
	bin := Program(t, "redis-server", "this test runs a real Redis as the gateway fleet's shared state; scripts/ci-redis.sh installs it (.ci/run does), or apt-get install redis-server")
	r := &Redis{bin: bin, dir: t.TempDir(), Password: "fleet-test-password"}
	if withTLS {
		r.setupTLS(t)
	}
	for attempt := 0; ; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		r.Addr = ln.Addr().String()
		_ = ln.Close()
		if r.start(t) {
			break
		}
		if attempt == 2 {
			b, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			t.Fatalf("redis-server did not start:\n%s", b)
		}
	}
	t.Cleanup(r.Stop)
	return r
}

// URL is the redis:// URL of the server (rediss:// with TLS), password
// included.
func (r *Redis) URL() string {
	scheme := "redis"
	if r.tlsArgs != nil {
		scheme = "rediss"
	}
	return fmt.Sprintf("%s://:%s@%s/0", scheme, r.Password, r.Addr)
}

func (r *Redis) start(t testing.TB) bool {
	t.Helper()
	_, port, _ := net.SplitHostPort(r.Addr)
	args := []string{"--bind", "127.0.0.1", "--port", port, "--requirepass", r.Password,
		"--dir", r.dir, "--save", "", "--appendonly", "yes", "--appendfsync", "everysec",
		"--logfile", filepath.Join(r.dir, "redis.log"), "--daemonize", "no"}
	if r.tlsArgs != nil {
		args = append(append(args, "--port", "0", "--tls-port", port), r.tlsArgs...)
	}
	cmd := exec.Command(r.bin, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		if r.ping() {
			r.cmd, r.exited = cmd, exited
			return true
		}
		select {
		case <-exited:
			return false
		case <-time.After(20 * time.Millisecond):
		}
	}
	_ = cmd.Process.Kill()
	<-exited
	return false
}

// ping sends AUTH and PING in RESP and reports whether PONG came back.
func (r *Redis) ping() bool {
	var c net.Conn
	var err error
	if r.tlsArgs != nil {
		c, err = tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", r.Addr, &tls.Config{RootCAs: r.RootCAs, ServerName: "127.0.0.1"})
	} else {
		c, err = net.DialTimeout("tcp", r.Addr, time.Second)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	fmt.Fprintf(c, "AUTH %s\r\nPING\r\n", r.Password)
	br := bufio.NewReader(c)
	for range 2 {
		l, err := br.ReadString('\n')
		if err != nil {
			return false
		}
		if strings.HasPrefix(l, "+PONG") {
			return true
		}
	}
	return false
}

// Stop stops the server (SIGTERM: it flushes its append-only file and
// closes every connection).
func (r *Redis) Stop() {
	if r.cmd == nil {
		return
	}
	_ = r.cmd.Process.Signal(os.Interrupt)
	select {
	case <-r.exited:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.exited
	}
	r.cmd = nil
}

// Start starts a stopped server again on the same address.
func (r *Redis) Start(t testing.TB) {
	t.Helper()
	if !r.start(t) {
		b, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
		t.Fatalf("redis-server did not start again on %s:\n%s", r.Addr, b)
	}
}
