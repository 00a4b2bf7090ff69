//go:build unix

package main

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/tunnel"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// TestSecondSignalStopsAtOnce: a second signal stops at once, with real signals:
// a server and a forwarder, each with a transfer running (each with its
// own peer, so that neither's abort ends the other's transfer first); the
// first SIGTERM starts their drains (60 s each) and is logged by both; the
// second ends both at once, each logging what it aborted and exiting 1. At
// 7f0589a the second signal was ignored (the drains ran their 60 s), the
// forwarder logged nothing, and both exited 0.
func TestSecondSignalStopsAtOnce(t *testing.T) {
	hold := make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(hold) })
	target := testnet.Serve(t, func(c net.Conn) {
		_, _ = c.Write([]byte("x"))
		<-hold
	})
	tokens := writeFile(t, "tokens", "s3cret\n")

	// tunnel serve, with a transfer from a plain mux client.
	serveAddr := freeAddr(t)
	srvOut, srvDone := launch(nil, "tunnel", "serve", "--listen", serveAddr, "--allow", target, "--token-file", tokens,
		"--shutdown-timeout", "60s")
	waitOrFail(t, srvOut.seen("serving"), "the server serving", srvOut)
	sess, err := (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer s3cret"}}}).Dial(context.Background(),
		"ws://"+serveAddr+tunnel.DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	st, err := sess.Open(context.Background(), http.Header{tunnel.TargetHeader: {target}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(st, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	// tunnel forward, to an in-process server, with a transfer.
	srv, err := tunnel.NewServer(tunnel.ServerConfig{Allow: []string{target}, Auth: auth.New([]string{"s3cret"}, nil),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		release.Do(func() { close(hold) }) // the targets first: the splices end
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Metrics().Sessions.Drain(ctx)
		srv.Wait()
	}()
	local := freeAddr(t)
	fwOut, fwDone := launch(nil, "tunnel", "forward", "--server", hs.URL, "--token-file", tokens,
		"--drain-timeout", "60s", local+":"+target)
	waitOrFail(t, fwOut.seen("tunnel: forwarding"), "the forwarder forwarding", fwOut)
	c := testnet.Dial(t, local)
	defer c.Close()
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}

	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitOrFail(t, srvOut.seen("shutting down"), "the server's drain", srvOut)
	waitOrFail(t, fwOut.seen("received SIGTERM"), "the forwarder logging the signal", fwOut)
	waitOrFail(t, fwOut.seen("tunnel: stopping"), "the forwarder's drain", fwOut)
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		name string
		out  *watchBuf
		done <-chan int
		want string
	}{{"tunnel serve", srvOut, srvDone, "aborted 1 session(s) with 1 open stream(s): second signal"},
		{"tunnel forward", fwOut, fwDone, "aborted 1 open connection(s): second signal"}} {
		select {
		case code := <-p.done:
			if code != exitError || !strings.Contains(p.out.String(), p.want) {
				t.Errorf("%s: exit %d, want %d and %q; output:\n%s", p.name, code, exitError, p.want, p.out.String())
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s still draining 10 s after the second SIGTERM; output:\n%s", p.name, p.out.String())
		}
	}
}
