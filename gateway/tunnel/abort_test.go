package tunnel

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// TestAbortedTransferIsReset: when the server's drain deadline cuts a
// transfer, the forwarder's local connection must end with a reset, not a
// clean end of file: a truncated download must not look complete. The
// server resets the stream (CONNECTION_RESET) before it closes the
// session (Server.abort), but mux loses that RST_STREAM when the stream
// still had queued data (TestMuxResetThenCloseDeliversReset), and reads a
// peer's Close as EOF: splice tells a cut stream by the session having
// ended while our direction was still open.
func TestAbortedTransferIsReset(t *testing.T) {
	chunk := randBytes(64 << 10)
	target := tcpServer(t, func(c net.Conn) {
		for { // a download that never ends: the server's stream always has data queued
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	})
	srv, err := NewServer(ServerConfig{Allow: []string{target}, Auth: auth.New([]string{testToken}, nil), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	served := make(chan error, 1)
	go func() {
		served <- ops.Serve(ctx, ln, srv.Handler(), ops.ServerOptions{ShutdownTimeout: 100 * time.Millisecond, Logger: testLogger(t)},
			srv.Metrics().Sessions, srv.Health())
	}()
	_, addrs := startForwarder(t, "http://"+ln.Addr().String(), testToken, target)
	c, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, len(chunk))); err != nil {
		t.Fatal(err)
	}
	stop() // the drain deadline (100 ms) cuts the download
	if err := <-served; err == nil {
		t.Fatal("Serve reported no aborted session")
	}
	n, err := io.Copy(io.Discard, c)
	if err == nil {
		t.Fatalf("the cut download ended with a clean EOF after %d more bytes; want a reset", n)
	}
	srv.Wait()
}

// TestMuxResetThenCloseDeliversReset: a stream reset with Write data still
// queued, then the session closed at once: the peer must read the reset,
// not a clean EOF.
func TestMuxResetThenCloseDeliversReset(t *testing.T) {
	for i := range 20 {
		got := make(chan *mux.Session, 1)
		hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if s, err := mux.Upgrade(w, r, nil); err == nil {
				got <- s
			}
		}))
		c, err := mux.Dial(context.Background(), "ws"+strings.TrimPrefix(hs.URL, "http"), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := <-got
		st, err := c.Open(context.Background(), nil)
		if err != nil {
			t.Fatal(err)
		}
		sst, err := srv.AcceptStream(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		_, _ = sst.Write([]byte("abc"))
		_ = sst.Reset(CodeConnReset)
		_ = srv.Close()
		b, err := io.ReadAll(st)
		c.Close()
		hs.Close()
		if err == nil {
			t.Fatalf("try %d: the peer read %q and a clean EOF; want the reset", i, b)
		}
	}
}
