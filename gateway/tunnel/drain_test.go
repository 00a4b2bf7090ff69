package tunnel

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

// TestDrainKeepsRunningTransfers: a drain must not cut running transfers.
// The server drains (SIGTERM's path: ops.Serve's context ends, GOAWAY goes out), and
// while a transfer through the forwarder is half done a new connection
// arrives at the forward's port. The new connection is refused (the
// server takes no new streams); the running transfer must still finish
// intact. At 7f0589a the forwarder closed its whole session when the new
// open failed with the GOAWAY, resetting the running transfer.
func TestDrainKeepsRunningTransfers(t *testing.T) {
	first, rest := randBytes(1<<20), randBytes(2<<20)
	release := make(chan struct{})
	var conns atomic.Int32
	target := tcpServer(t, func(c net.Conn) {
		if conns.Add(1) > 1 {
			_, _ = c.Write([]byte("late")) // a connection that slipped in before the GOAWAY
			return
		}
		if _, err := c.Write(first); err != nil {
			return
		}
		select {
		case <-release:
		case <-time.After(20 * time.Second):
			return
		}
		_, _ = c.Write(rest)
	})
	srv, ln, stop, served := drainingServer(t, target)
	defer stop()
	var fwLog testnet.Buffer
	fw, err := NewForwarder(ClientConfig{Server: "http://" + ln.Addr().String(), Token: testToken,
		Logger: slog.New(slog.NewTextHandler(io.MultiWriter(&fwLog, testnet.LogWriter{T: t}), nil))},
		[]Forward{{Local: "127.0.0.1:0", Target: target}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	fwCtx, fwStop := context.WithCancel(context.Background())
	fwDone := make(chan error, 1)
	go func() { fwDone <- fw.Run(fwCtx) }()
	defer func() {
		fwStop()
		if err := <-fwDone; err != nil {
			t.Error(err)
		}
	}()
	addrs := []string{fw.Addrs()[0].String()}

	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).CloseWrite() // a download: nothing to send
	got := make([]byte, len(first))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("first half: %v", err)
	}

	stop() // SIGTERM to the server: GOAWAY, drain for 20 s

	// New connections are refused while the server drains; one may slip
	// in before the GOAWAY arrives and finish normally. Each is closed
	// either way (what the forwarder does with them is the point).
	for i := 0; ; i++ {
		nc, err := net.Dial("tcp", addrs[0])
		if err != nil {
			break // refused at once: the forwarder reset it before Dial returned
		}
		_ = nc.(*net.TCPConn).CloseWrite()
		_ = nc.SetReadDeadline(time.Now().Add(15 * time.Second))
		b, err := io.ReadAll(nc)
		nc.Close()
		if err != nil || len(b) == 0 {
			break // refused: reset or closed without a byte
		}
		if string(b) != "late" {
			t.Fatalf("a new connection read %q", b)
		}
		if i > 50 {
			t.Fatal("new connections still served during the drain")
		}
	}

	close(release)
	tail, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the running transfer died during the drain after %d of %d bytes: %v",
			len(first)+len(tail), len(first)+len(rest), err)
	}
	if !bytes.Equal(got, first) || !bytes.Equal(tail, rest) {
		t.Fatalf("the running transfer got %d+%d bytes, want %d+%d intact", len(got), len(tail), len(first), len(rest))
	}
	select {
	case err := <-served:
		if err != nil && !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Serve did not return after the last stream ended")
	}
	srv.Wait()
	// The forwarder said why the new connection failed (logged before it
	// was aborted).
	if !strings.Contains(fwLog.String(), "the server sent GOAWAY") {
		t.Errorf("the forwarder did not log the server's GOAWAY:\n%s", fwLog.String())
	}
}

// TestForwarderLogsGoAwayOnArrival: the forwarder logs the server's GOAWAY
// when it arrives, while its connection still runs (not at the next open
// it refuses, nor when the session ends).
func TestForwarderLogsGoAwayOnArrival(t *testing.T) {
	release := make(chan struct{})
	target := tcpServer(t, func(c net.Conn) {
		if _, err := c.Write([]byte("first")); err != nil {
			return
		}
		<-release
		_, _ = c.Write([]byte("rest"))
	})
	_, ln, stop, served := drainingServer(t, target)
	defer stop()
	logged := make(chan struct{})
	var once sync.Once
	h := &signalHandler{Handler: slog.NewTextHandler(testnet.LogWriter{T: t}, nil), match: "the server sent GOAWAY",
		hit: func() { once.Do(func() { close(logged) }) }}
	fw, err := NewForwarder(ClientConfig{Server: "http://" + ln.Addr().String(), Token: testToken, Logger: slog.New(h)},
		[]Forward{{Local: "127.0.0.1:0", Target: target}})
	if err != nil {
		t.Fatal(err)
	}
	if err := fw.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := fw.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	fwCtx, fwStop := context.WithCancel(context.Background())
	fwDone := make(chan error, 1)
	go func() { fwDone <- fw.Run(fwCtx) }()
	defer func() {
		fwStop()
		<-fwDone
	}()
	c, err := net.Dial("tcp", fw.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.(*net.TCPConn).CloseWrite() // a download: nothing to send
	got := make([]byte, len("first"))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	stop() // the server drains: GOAWAY
	<-logged
	// Logged while the connection runs: its transfer then completes.
	close(release)
	rest, err := io.ReadAll(c)
	if err != nil || string(rest) != "rest" {
		t.Fatalf("after the GOAWAY the running connection read %q, %v", rest, err)
	}
	if err := <-served; err != nil {
		t.Fatalf("the drain aborted a session: %v", err)
	}
}

// signalHandler calls hit for every record whose message contains match.
type signalHandler struct {
	slog.Handler
	match string
	hit   func()
}

func (h *signalHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.match) {
		h.hit()
	}
	return h.Handler.Handle(ctx, r)
}

// drainingServer serves the tunnel to target on a loopback listener the way
// `wsmux tunnel serve` does (ops.Serve, a 20 s drain); stop is its SIGTERM,
// and served reports how Serve ended.
func drainingServer(t *testing.T, target string) (*Server, net.Listener, context.CancelFunc, <-chan error) {
	t.Helper()
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
		served <- ops.Serve(ctx, ln, srv.Handler(), ops.ServerOptions{ShutdownTimeout: 20 * time.Second, Logger: testLogger(t)},
			srv.Metrics().Sessions, srv.Health())
	}()
	return srv, ln, stop, served
}
