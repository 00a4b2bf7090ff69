package ops

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// serve runs Serve on a loopback listener with opts until the test ends;
// it returns the address and the metrics.
func serve(t *testing.T, opts ServerOptions) (string, *Metrics) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics()
	opts.Metrics = m
	opts.ShutdownTimeout = time.Second
	opts.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	h := http.NewServeMux()
	var health Health
	h.Handle("/healthz", &health)
	h.Handle("/metrics", m.Handler())
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ln, h, opts, m.Sessions, &health) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String(), m
}

// testLog writes each log line to the test's log.
type testLog struct{ t *testing.T }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// request sends one keep-alive GET of path on c and reads the answer.
func request(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// closedByServer waits until the server ends c (EOF or a reset) and
// returns how long that took; it fails if c is still open after limit.
func closedByServer(t *testing.T, c net.Conn, r io.Reader, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.SetReadDeadline(start.Add(limit))
	_, err := r.Read(make([]byte, 1))
	took := time.Since(start)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the connection is still open after %v", limit)
	}
	if err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("read: %v, want EOF or a reset", err)
	}
	return took
}

// refused dials addr and waits until the server ends the connection at
// once (on loopback the reset may even arrive before connect returns).
func refused(t *testing.T, addr string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if errors.Is(err, syscall.ECONNRESET) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	closedByServer(t, c, c, 5*time.Second)
}

// TestIdleConnectionClosed: a keep-alive connection left idle after one
// request is closed by the server once IdleTimeout passes, and one that
// never finishes its request head once ReadHeaderTimeout passes. Before,
// an idle connection stayed open for good (and a half-sent head for 10 s,
// whatever was configured).
func TestIdleConnectionClosed(t *testing.T) {
	addr, _ := serve(t, ServerOptions{Conns: ConnLimits{IdleTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 300 * time.Millisecond}})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	if resp := request(t, c, br, "/healthz"); resp.StatusCode != 200 || resp.Close {
		t.Fatalf("%s, close %v: want a kept-alive 200", resp.Status, resp.Close)
	}
	if took := closedByServer(t, c, br, 5*time.Second); took < 200*time.Millisecond {
		t.Errorf("closed after %v, before the idle timeout", took)
	}

	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	io.WriteString(slow, "GET /healthz HTTP/1.1\r\nHost: te")
	closedByServer(t, slow, slow, 5*time.Second)
}

// TestConnectionCap: with MaxConns 2, two kept-alive connections are
// served and a third is closed at once, counted in
// wsmux_connections_refused_total, while wsmux_connections_open says 2.
func TestConnectionCap(t *testing.T) {
	addr, _ := serve(t, ServerOptions{Conns: ConnLimits{MaxConns: 2}})
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	var br *bufio.Reader
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
		br = bufio.NewReader(c)
		request(t, c, br, "/healthz")
	}
	refused(t, addr)
	body := get0(t, held[1], br)
	for _, want := range []string{`wsmux_connections_open{listener="http"} 2`, `wsmux_connections_refused_total{listener="http"} 1`} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// get0 reads /metrics over c (one of the held connections).
func get0(t *testing.T, c net.Conn, br *bufio.Reader) string {
	t.Helper()
	if _, err := io.WriteString(c, "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// TestLimitListener: the gate counts accepted connections; one beyond the
// limit is closed at accept and the next Accept waits for another; a slot
// is returned when the server reports the connection closed or hijacked,
// and a hijacked connection counts again through held.
func TestLimitListener(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var sessions atomic.Int64
	m := NewMetrics()
	g, err := NewConnGate("test", 2, func() int { return int(sessions.Load()) }, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	ln, hook := LimitListener(raw, g)
	defer ln.Close()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", raw.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	accepted := make(chan net.Conn)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	dial()
	dial()
	a, b := <-accepted, <-accepted
	defer a.Close()
	defer b.Close()
	if g.Open() != 2 {
		t.Fatalf("open %d, want 2", g.Open())
	}
	refused(t, raw.Addr().String())
	if v := Value(m.ConnsRefused.WithLabelValues("test")); v != 1 {
		t.Errorf("refused %v, want 1", v)
	}
	hook(a, http.StateActive) // not an end: nothing returned
	hook(a, http.StateClosed)
	dial()
	d := <-accepted
	defer d.Close()
	// b upgraded: its slot moves to the sessions.
	hook(b, http.StateHijacked)
	sessions.Store(1)
	if g.Open() != 2 {
		t.Fatalf("open %d after the hijack, want 2 (one HTTP, one session)", g.Open())
	}
	refused(t, raw.Addr().String())
	sessions.Store(0)
	dial()
	e := <-accepted
	e.Close()
	if v := Value(m.ConnsRefused.WithLabelValues("test")); v != 2 {
		t.Errorf("refused %v, want 2", v)
	}
}
