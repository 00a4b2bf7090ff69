package mux

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"

	"github.com/wsmux/wsmux/frame"
)

// resumeServer is a test server with resumption on whose sessions echo
// every stream.
type resumeServer struct {
	srv      *httptest.Server
	reg      *ResumeRegistry
	sessions chan *Session
	changed  chan struct{} // the registry's suspended set changed
}

func newResumeServer(t testing.TB, reg *ResumeRegistry, tune func(*Config)) *resumeServer {
	rs := &resumeServer{reg: reg, sessions: make(chan *Session, 16), changed: make(chan struct{}, 1)}
	reg.changed = func() { notify(rs.changed) }
	cfg := DefaultConfig()
	cfg.Resume = true
	cfg.ResumeRegistry = reg
	if tune != nil {
		tune(cfg)
	}
	rs.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, cfg)
		if err != nil {
			return
		}
		rs.sessions <- s
		go func() {
			for {
				st, err := s.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(st, st); _ = st.CloseWrite() }()
			}
		}()
	}))
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *resumeServer) host() string { return strings.TrimPrefix(rs.srv.URL, "http://") }

// waitSuspended waits until the registry holds n suspended sessions.
func (rs *resumeServer) waitSuspended(t *testing.T, n int) {
	t.Helper()
	for rs.reg.Suspended() != n {
		<-rs.changed
	}
}

// dialResume dials url with resumption on, as the caller auth.
func dialResume(t *testing.T, url, auth string, tune func(*Config)) *Session {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Resume = true
	if tune != nil {
		tune(cfg)
	}
	d := Dialer{Config: cfg}
	if auth != "" {
		d.Header = http.Header{"Authorization": {auth}}
	}
	s, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// resumeEcho opens a stream, sends msg, half-closes and checks the echo.
func resumeEcho(t *testing.T, s *Session, msg string) {
	t.Helper()
	st, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if _, err := st.Write([]byte(msg)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	_ = st.CloseWrite()
	b, err := io.ReadAll(st)
	if err != nil || string(b) != msg {
		t.Fatalf("echo %q, %v; want %q", b, err, msg)
	}
}

func byAuthorization(r *http.Request) string { return r.Header.Get("Authorization") }

// TestResumeMaxSuspended: with MaxSuspended 2, a third suspension ends
// the session suspended longest (ErrResumeEvicted on the server; its
// client's resume gets 404 and ends with ErrResumeRefused at once), and
// the two others resume and work.
func TestResumeMaxSuspended(t *testing.T) {
	rs := newResumeServer(t, &ResumeRegistry{MaxSuspended: 2}, nil)
	var clients []*Session
	var servers []*Session
	var proxies []*faultProxy
	for i := range 3 {
		p := newFaultProxy(t, rs.host())
		c := dialResume(t, "ws://"+p.addr()+"/", "", nil)
		resumeEcho(t, c, "before")
		clients, proxies = append(clients, c), append(proxies, p)
		servers = append(servers, <-rs.sessions)
		_ = i
	}
	for i, p := range proxies {
		p.setRefuse(true) // redials fail until told otherwise
		p.cutAll()
		rs.waitSuspended(t, min(i+1, 2))
	}
	<-servers[0].Done()
	if err := servers[0].Err(); !errors.Is(err, ErrResumeEvicted) {
		t.Fatalf("oldest suspended session ended with %v, want ErrResumeEvicted", err)
	}
	if rs.reg.Suspended() != 2 || rs.reg.Evicted() != 1 {
		t.Fatalf("registry: %d suspended, %d evicted", rs.reg.Suspended(), rs.reg.Evicted())
	}
	for _, p := range proxies {
		p.setRefuse(false)
	}
	<-clients[0].Done()
	err := clients[0].Err()
	var he *HandshakeError
	if !errors.Is(err, ErrResumeRefused) || !errors.As(err, &he) || he.StatusCode != http.StatusNotFound {
		t.Fatalf("evicted session's client ended with %v, want ErrResumeRefused (404)", err)
	}
	for i, c := range clients[1:] {
		resumeEcho(t, c, "after")
		if st := c.Stats(); st.Resumes != 1 || st.ResumeFailures != 0 {
			t.Fatalf("client %d: %+v", i+1, st)
		}
	}
	if st := clients[0].Stats(); st.ResumeFailures != 1 {
		t.Fatalf("evicted client: %d resume failures", st.ResumeFailures)
	}
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	return len(ents)
}

// TestResumeTimeoutExpiry: a session whose connection drops and does not
// come back within ResumeTimeout ends on both sides with ErrResumeTimeout
// (code KEEPALIVE_TIMEOUT): a Read waiting on a stream, a Write, Open and
// AcceptStream all get it; no goroutine and no descriptor is left.
func TestResumeTimeoutExpiry(t *testing.T) {
	fds := openFDs(t)
	ignore := leakcheck.IgnoreCurrent()
	t.Cleanup(func() { // runs last: after the servers and proxies closed
		leakcheck.VerifyNone(t, ignore)
		if n := openFDs(t); n > fds {
			t.Errorf("%d descriptors open, %d before", n, fds)
		}
	})
	short := func(c *Config) { c.ResumeTimeout = 300 * time.Millisecond }
	rs := newResumeServer(t, &ResumeRegistry{}, short)
	p := newFaultProxy(t, rs.host())
	c := dialResume(t, "ws://"+p.addr()+"/", "", short)
	resumeEcho(t, c, "before")
	ss := <-rs.sessions
	st, err := c.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	readErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, err := st.Read(make([]byte, 10)) // the server echoes nothing: it waits
		readErr <- err
	}()
	p.setRefuse(true)
	p.cutAll()
	<-c.Done()
	<-ss.Done()
	wg.Wait()
	for name, err := range map[string]error{"client": c.Err(), "server": ss.Err(), "Read": <-readErr} {
		var se *SessionError
		if !errors.Is(err, ErrResumeTimeout) || !errors.As(err, &se) || se.Code != frame.KeepaliveTimeout {
			t.Errorf("%s: %v, want ErrResumeTimeout (KEEPALIVE_TIMEOUT)", name, err)
		}
	}
	if _, err := st.Write([]byte("x")); !errors.Is(err, ErrResumeTimeout) {
		t.Errorf("Write: %v", err)
	}
	if _, err := c.Open(context.Background(), nil); !errors.Is(err, ErrResumeTimeout) {
		t.Errorf("Open: %v", err)
	}
	if _, err := ss.AcceptStream(context.Background()); !errors.Is(err, ErrResumeTimeout) {
		t.Errorf("AcceptStream: %v", err)
	}
	for name, s := range map[string]*Session{"client": c, "server": ss} {
		if st := s.Stats(); st.Suspends != 1 || st.Resumes != 0 || st.ResumeFailures != 1 {
			t.Errorf("%s stats: %d suspensions, %d resumes, %d failures", name, st.Suspends, st.Resumes, st.ResumeFailures)
		}
	}
	if rs.reg.Len() != 0 || rs.reg.Suspended() != 0 {
		t.Errorf("registry: %d sessions, %d suspended", rs.reg.Len(), rs.reg.Suspended())
	}
}

// TestResumeAfterServerTimeout: the server's ResumeTimeout is shorter
// than the client's; the client comes back after the server ended the
// session and gets 404 at once (ErrResumeRefused), without waiting for
// its own timeout.
func TestResumeAfterServerTimeout(t *testing.T) {
	rs := newResumeServer(t, &ResumeRegistry{}, func(c *Config) { c.ResumeTimeout = 100 * time.Millisecond })
	p := newFaultProxy(t, rs.host())
	c := dialResume(t, "ws://"+p.addr()+"/", "", func(c *Config) { c.ResumeTimeout = time.Hour })
	resumeEcho(t, c, "before")
	ss := <-rs.sessions
	p.setRefuse(true)
	p.cutAll()
	<-ss.Done()
	if err := ss.Err(); !errors.Is(err, ErrResumeTimeout) {
		t.Fatalf("server: %v, want ErrResumeTimeout", err)
	}
	p.setRefuse(false)
	<-c.Done() // an hour-long resume timeout: only the 404 ends it
	err := c.Err()
	var he *HandshakeError
	if !errors.Is(err, ErrResumeRefused) || !errors.As(err, &he) || he.StatusCode != http.StatusNotFound || he.Header.Get(headerResume) != "unknown" {
		t.Fatalf("client: %v, want ErrResumeRefused (404, Wsmux-Resume: unknown)", err)
	}
}

// TestResumeServerRestarted: the server process is replaced while the
// connection is down (a new registry: the session is gone); the client's
// resume gets 404 and the session ends at once with ErrResumeRefused;
// streams fail with it instead of hanging. A new session works.
func TestResumeServerRestarted(t *testing.T) {
	old := newResumeServer(t, &ResumeRegistry{}, nil)
	p := newFaultProxy(t, old.host())
	c := dialResume(t, "ws://"+p.addr()+"/", "", func(c *Config) { c.ResumeTimeout = time.Hour })
	resumeEcho(t, c, "before")
	st, err := c.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	oldSession := <-old.sessions
	restarted := newResumeServer(t, &ResumeRegistry{}, nil)
	p.setTarget(restarted.host())
	p.cutAll()
	_ = oldSession.Close() // the old process is gone, and its sessions
	if _, err := st.Read(make([]byte, 1)); !errors.Is(err, ErrResumeRefused) {
		t.Fatalf("Read: %v, want ErrResumeRefused", err)
	}
	<-c.Done()
	// The end names what happened and what to do, not a local fault.
	var se *SessionError
	if err := c.Err(); !errors.As(err, &se) || se.Code != frame.ConnectError || strings.Contains(err.Error(), "INTERNAL_ERROR") || !strings.Contains(err.Error(), "open a new one") {
		t.Fatalf("session ended with %v, want CONNECT_ERROR and ErrResumeRefused's advice", err)
	}
	if st := c.Stats(); st.ResumeFailures != 1 {
		t.Fatalf("%d resume failures", st.ResumeFailures)
	}
	fresh := dialResume(t, "ws://"+p.addr()+"/", "", nil)
	resumeEcho(t, fresh, "a new session")
}

// TestResumeRefusedWhileSuspended: while a session is suspended, a
// resume with a wrong token gets 404 and one with the session's token but
// another caller's credentials 403; neither disturbs it, and its own
// client then resumes it.
func TestResumeRefusedWhileSuspended(t *testing.T) {
	rs := newResumeServer(t, &ResumeRegistry{Identity: byAuthorization}, nil)
	p := newFaultProxy(t, rs.host())
	c := dialResume(t, "ws://"+p.addr()+"/", "Bearer alice", nil)
	resumeEcho(t, c, "before")
	ss := <-rs.sessions
	p.setRefuse(true)
	p.cutAll()
	rs.waitSuspended(t, 1)
	c.mu.Lock()
	tok := c.res.token
	c.mu.Unlock()
	direct := "ws://" + rs.host() + "/"
	for _, tc := range []struct {
		name, auth, token string
		status            int
	}{
		{"wrong token", "Bearer alice", "AAAAAAAAAAAAAAAAAAAAAA", http.StatusNotFound},
		{"another caller", "Bearer mallory", tok, http.StatusForbidden},
	} {
		h := http.Header{"Authorization": {tc.auth}, HeaderResumeToken: {tc.token}, HeaderResumeReceived: {"0"}}
		d := Dialer{Config: &Config{Resume: true}, Header: h}
		_, err := d.Dial(context.Background(), direct)
		var he *HandshakeError
		if !errors.As(err, &he) || he.StatusCode != tc.status {
			t.Fatalf("%s: %v, want %d", tc.name, err, tc.status)
		}
		if ss.Err() != nil || rs.reg.Suspended() != 1 {
			t.Fatalf("%s disturbed the session: %v, %d suspended", tc.name, ss.Err(), rs.reg.Suspended())
		}
	}
	p.setRefuse(false)
	resumeEcho(t, c, "after")
	if st := c.Stats(); st.Resumes != 1 || st.ResumeFailures != 0 {
		t.Fatalf("client stats %+v", st)
	}
	if st := ss.Stats(); st.Resumes != 1 || st.ResumeFailures != 0 {
		t.Fatalf("server stats %+v", st)
	}
}

// TestResumeSilentPath: the path goes silent (bytes dropped both ways,
// no reset, no close: a NAT entry or a balancer's flow gone). With
// resumption in effect the keepalive timeout suspends the session instead
// of failing it; the client redials and the session resumes, a Read that
// waited through it gets its bytes.
func TestResumeSilentPath(t *testing.T) {
	keepalive := func(c *Config) {
		c.KeepAliveInterval = 100 * time.Millisecond
		c.KeepAliveTimeout = time.Second
	}
	rs := newResumeServer(t, &ResumeRegistry{}, keepalive)
	p := newFaultProxy(t, rs.host())
	c := dialResume(t, "ws://"+p.addr()+"/", "", keepalive)
	resumeEcho(t, c, "before")
	ss := <-rs.sessions
	st, err := c.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	p.blackhole()
	if _, err := st.Write([]byte("through the silence")); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseWrite()
	b, err := io.ReadAll(st)
	if err != nil || string(b) != "through the silence" {
		t.Fatalf("echo %q, %v", b, err)
	}
	// A loaded machine may starve a healthy connection past the keepalive
	// timeout too: more suspensions than one are fine, failures are not.
	if cs := c.Stats(); cs.Suspends == 0 || cs.Resumes == 0 || cs.ResumeFailures != 0 {
		t.Fatalf("client: %d suspensions, %d resumes, %d failures", cs.Suspends, cs.Resumes, cs.ResumeFailures)
	}
	if err := ss.Err(); err != nil {
		t.Fatalf("server session: %v", err)
	}
	if st := ss.Stats(); st.Resumes == 0 || st.ResumeFailures != 0 {
		t.Fatalf("server: %d resumes, %d failures", st.Resumes, st.ResumeFailures)
	}
}
