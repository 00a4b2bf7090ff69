package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/clustertest"
)

// keptAlive dials addr and makes one kept-alive request of path.
func keptAlive(t *testing.T, addr, path string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	body := ask(t, c, br, path)
	return c, br, body
}

// ask sends a GET of path on c and returns the body.
func ask(t *testing.T, c net.Conn, br *bufio.Reader, path string) string {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Close {
		t.Fatalf("GET %s: the server will close the connection", path)
	}
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// endedByServer waits for the server to end c (EOF or a reset); it fails
// if c is still open after limit.
func endedByServer(t *testing.T, c net.Conn, r io.Reader, limit time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(limit))
	_, err := r.Read(make([]byte, 1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after %v", limit)
	}
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want EOF or a reset", err)
	}
}

// TestServerConnectionFlags: --max-connections closes the connection
// over it at once (counted), and --idle-timeout closes kept-alive
// connections left idle, on the gateway and the tunnel server alike.
func TestServerConnectionFlags(t *testing.T) {
	cl := clustertest.Start(t)
	kubeconfig := writeFile(t, "kubeconfig", cl.Kubeconfig())
	tokens := writeFile(t, "tokens", "caller,alice\n")
	limits := []string{"--idle-timeout", "300ms", "--max-connections", "2"}
	for name, args := range map[string][]string{
		"gateway": {"gateway", "--token-file", tokens, "--kubeconfig", kubeconfig},
		"tunnel":  {"tunnel", "serve", "--token-file", tokens, "--allow", "127.0.0.1:1"},
	} {
		t.Run(name, func(t *testing.T) {
			addr := freeAddr(t)
			ctx, stop := context.WithCancel(context.Background())
			out, done := launch(ctx, append(append(args, "--listen", addr), limits...)...)
			defer func() {
				stop()
				if code := <-done; code != 0 {
					t.Errorf("exit %d; output:\n%s", code, out.String())
				}
			}()
			// No connection before these two: the count is theirs.
			waitOrFail(t, out.seen("serving"), "serving", out)
			a, abr, _ := keptAlive(t, addr, "/healthz")
			b, bbr, _ := keptAlive(t, addr, "/healthz")
			over, err := net.Dial("tcp", addr)
			if err == nil {
				endedByServer(t, over, over, 5*time.Second)
				over.Close()
			} else if !errors.Is(err, syscall.ECONNRESET) {
				t.Fatal(err)
			}
			m := ask(t, a, abr, "/metrics")
			for _, want := range []string{`wsmux_connections_refused_total{listener="http"} 1`, `wsmux_connections_open{listener="http"} 2`} {
				if !strings.Contains(m, want) {
					t.Errorf("/metrics lacks %s", want)
				}
			}
			endedByServer(t, a, abr, 5*time.Second)
			endedByServer(t, b, bbr, 5*time.Second)
			if !strings.Contains(out.String(), "at the connection limit") {
				t.Errorf("the refusal is not logged:\n%s", out.String())
			}
		})
	}
}
