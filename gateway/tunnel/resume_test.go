package tunnel

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/internal/resetproxy"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// resumeEnv is a tunnel server with resumption on, behind a proxy that
// cuts every connection after every bytes moved, max times, and a
// Forwarder through the proxy whose log is captured.
type resumeEnv struct {
	srv   *Server
	hs    *httptest.Server
	proxy *resetproxy.Proxy
	f     *Forwarder
	addr  string
	log   *testnet.Buffer
	h     atomic.Pointer[http.Handler]
}

// restart replaces the server behind the proxy by a new one (a restarted
// server: it holds none of the old one's sessions).
func (e *resumeEnv) restart(t *testing.T, target string, resume time.Duration) {
	srv, err := NewServer(ServerConfig{Allow: []string{target}, Auth: auth.New([]string{testToken}, nil),
		Logger: testLogger(t), ResumeTimeout: resume})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Metrics().Sessions.Drain(ctx)
		srv.Wait()
	})
	e.srv = srv
	h := srv.Handler()
	e.h.Store(&h)
}

func startResumeEnv(t *testing.T, target string, serverResume time.Duration, every int64, max int) *resumeEnv {
	t.Helper()
	e := &resumeEnv{log: &testnet.Buffer{}}
	e.restart(t, target, serverResume)
	e.hs = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*e.h.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(e.hs.Close)
	e.proxy = testnet.NewCutProxy(t, strings.TrimPrefix(e.hs.URL, "http://"), every, max)
	logger := slog.New(slog.NewTextHandler(io.MultiWriter(e.log, testnet.LogWriter{T: t}), nil))
	f, err := NewForwarder(ClientConfig{Server: "http://" + e.proxy.Addr(), Token: testToken, Logger: logger,
		DrainTimeout: 5 * time.Second, ResumeTimeout: 20 * time.Second}, []Forward{{Local: "127.0.0.1:0", Target: target}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	e.f, e.addr = f, f.Addrs()[0].String()
	return e
}

func (e *resumeEnv) session() *mux.Session {
	e.f.mu.Lock()
	defer e.f.mu.Unlock()
	return e.f.sess
}

// TestForwardResumesAfterCuts: four connections echo 4 MiB each through a
// tunnel whose TCP connection is reset three times mid-transfer; every
// echo arrives whole (sha256), the tunnel keeps its one session, and the
// Forwarder logs each drop and each resume.
func TestForwardResumesAfterCuts(t *testing.T) {
	echo := echoServer(t)
	e := startResumeEnv(t, echo, 20*time.Second, 6<<20, 3)
	s := e.session()
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { roundTrip(t, e.addr, randBytes(4<<20)) })
	}
	wg.Wait()
	if got := e.proxy.Cuts(); got != 3 {
		t.Fatalf("%d cuts, want 3 (moved %d bytes)", got, e.proxy.Moved())
	}
	if now := e.session(); now != s {
		t.Fatal("the Forwarder dialled a new session: the old one was not resumed")
	}
	st := s.Stats()
	if st.Suspends != 3 || st.Resumes != 3 {
		t.Fatalf("client session: %d suspensions, %d resumes; want 3 and 3", st.Suspends, st.Resumes)
	}
	logs := e.log.String()
	if n := strings.Count(logs, "tunnel: connection lost"); n != 3 {
		t.Errorf("%d drop log lines, want 3:\n%s", n, logs)
	}
	if n := strings.Count(logs, "tunnel: session resumed"); n != 3 {
		t.Errorf("%d resume log lines, want 3:\n%s", n, logs)
	}
	if strings.Contains(logs, "session lost") {
		t.Errorf("a session was lost:\n%s", logs)
	}
}

// TestForwardWithoutServerResume: a server with resumption off does not
// negotiate it; a cut ends the session as before (logged), and the next
// connection opens a new session that works.
func TestForwardWithoutServerResume(t *testing.T) {
	echo := echoServer(t)
	e := startResumeEnv(t, echo, 0, 1<<40, 0)
	s := e.session()
	roundTrip(t, e.addr, randBytes(64<<10))
	e.proxy.Cut()
	<-s.CloseChan()
	roundTrip(t, e.addr, randBytes(64<<10))
	if e.session() == s {
		t.Fatal("the ended session is still in use")
	}
	// The session's watcher logs its end on its own goroutine.
	e.log.Await(t, "session lost", 10*time.Second)
	logs := e.log.String()
	if strings.Contains(logs, "resumed") || strings.Contains(logs, "connection lost") {
		t.Errorf("resumption events without resumption:\n%s", logs)
	}
}

// TestForwardResumeRefusedUnknown: the server restarted (the session is
// gone): the resume gets 404 with "Wsmux-Resume: unknown", the Forwarder
// logs that the server does not hold the session, at once, without waiting
// for its resume timeout, and the next connection opens a new session.
func TestForwardResumeRefusedUnknown(t *testing.T) {
	echo := echoServer(t)
	e := startResumeEnv(t, echo, 20*time.Second, 1<<40, 0)
	s := e.session()
	roundTrip(t, e.addr, randBytes(64<<10))
	e.restart(t, echo, 20*time.Second)
	e.proxy.Cut()
	<-s.CloseChan()
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "404") {
		t.Fatalf("session error %v, want the resume's 404", err)
	}
	roundTrip(t, e.addr, randBytes(64<<10))
	logs := e.log.String()
	if !strings.Contains(logs, "does not hold the session") || !strings.Contains(logs, "status=404") {
		t.Errorf("the refusal was not logged:\n%s", logs)
	}
}
