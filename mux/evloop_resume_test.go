package mux

import (
	"context"
	"crypto/rand"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// Resumable sessions run on the event loop too, and keep its promise: 50
// resumable session pairs, idle after an echo, add the loop's few
// goroutines and not 2-3 per end; then every server end loses its
// connection (closed under it), both ends suspend, the clients redial and
// resume, the same streams echo again, and the idle resumed sessions still
// hold no goroutine (the redials and the resume handlers are gone).
func TestEventLoopResumeHoldsNoGoroutine(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the event loop serves Linux sockets")
	}
	const pairs = 50
	sessions := make(chan *Session, pairs+1)
	scfg := evCfg(nil)
	scfg.Resume = true
	scfg.ResumeRegistry = &ResumeRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, err := Upgrade(w, r, scfg); err == nil {
			sessions <- s
		}
	}))
	defer srv.Close()
	resumed := make(chan *Session, pairs)
	ccfg := evCfg(nil)
	ccfg.Resume = true
	ccfg.OnResumeEvent = func(s *Session, ev ResumeEvent) {
		if ev.Kind == ResumeResumed { // not a suspension, a refusal or a failed redial
			resumed <- s
		}
	}
	url := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/"
	type pair struct {
		c, s *Session
		a, b *Stream
	}
	dial := func() pair {
		c, err := Dial(context.Background(), url, ccfg)
		require.NoError(t, err)
		s := <-sessions
		t.Cleanup(func() { _ = c.Close(); _ = s.Close() })
		require.NotNil(t, c.onLoop(), "client on the event loop")
		require.NotNil(t, s.onLoop(), "server on the event loop")
		a, b := openPair(t, c, s)
		echoOnce(t, a, b, []byte{1})
		return pair{c, s, a, b}
	}
	dial() // the loop is up
	base := runtime.NumGoroutine()
	ps := make([]pair, pairs)
	for i := range ps {
		ps[i] = dial()
	}
	loop, err := defaultLoop()
	require.NoError(t, err)
	grown := runtime.NumGoroutine() - base
	t.Logf("%d idle resumable session ends: %d more goroutines", 2*pairs, grown)
	require.LessOrEqual(t, grown, 2+loop.pool.Running(), "goroutines that are not the loop's")

	for _, p := range ps {
		p.s.res.sc.drop() // the server's connection fails under it
	}
	for range pairs {
		<-resumed
	}
	msg := make([]byte, 100<<10) // larger than a socket write: the new registration's edges work
	_, _ = rand.Read(msg)
	for _, p := range ps {
		echoOnce(t, p.a, p.b, msg)
		require.Equal(t, uint64(1), p.c.Stats().Resumes, "client resumes")
		require.Equal(t, uint64(1), p.s.Stats().Resumes, "server resumes")
		require.NotNil(t, p.c.onLoop())
	}
	// The redial goroutines and the resume requests' handlers have
	// returned by now or are about to; a session that kept a goroutine
	// of its own would add 100.
	grown = runtime.NumGoroutine() - base
	t.Logf("after a resume each: %d more goroutines", grown)
	require.Less(t, grown, pairs/2, "resumed idle sessions hold goroutines")
}

// A resume whose connection the poller cannot serve (here a wrapper around
// the TCP connection, as TLS terminated in the process would be) ends an
// event-loop session at once with an error that says why and what to do,
// instead of suspending again after every resume until the resume timeout.
func TestEventLoopResumeNotPollable(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the event loop serves Linux sockets")
	}
	rs := newResumeServer(t, &ResumeRegistry{}, func(c *Config) { c.Driver = DriverEventLoop })
	var dials atomic.Int32
	cfg := evCfg(nil)
	cfg.Resume = true
	cfg.ResumeTimeout = time.Hour // only the error may end it
	d := Dialer{Config: cfg, NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var nd net.Dialer
		c, err := nd.DialContext(ctx, network, addr)
		if err != nil || dials.Add(1) == 1 {
			return c, err
		}
		return struct{ net.Conn }{c}, nil // the resumes: not a plain socket
	}}
	c, err := d.Dial(context.Background(), "ws://"+rs.host()+"/")
	require.NoError(t, err)
	defer c.Close()
	require.NotNil(t, c.onLoop(), "client on the event loop")
	resumeEcho(t, c, "before")
	ss := <-rs.sessions
	defer ss.Close() // it resumed, then lost the client for good: suspended
	ss.res.sc.drop()
	<-c.Done()
	require.ErrorIs(t, c.Err(), errResumeNotPollable)
	require.Contains(t, c.Err().Error(), "DriverFastPaths")
	require.Equal(t, int32(2), dials.Load(), "one resume, no retry")
}
