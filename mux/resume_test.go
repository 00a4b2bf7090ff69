package mux

import (
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/resetproxy"
	"github.com/wsmux/wsmux/mux/internal/engine"
)

// newCutProxy starts a TCP proxy to target that resets every connection
// through it on demand; t's cleanup closes it.
func newCutProxy(t *testing.T, target string) *resetproxy.Proxy {
	p, err := resetproxy.Listen(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// patternReader yields n bytes of a seeded pseudo-random stream.
type patternReader struct {
	rng *rand.ChaCha8
	n   int
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	p = p[:min(len(p), r.n)]
	_, _ = r.rng.Read(p)
	r.n -= len(p)
	return len(p), nil
}

func patternSum(seed byte, n int) [32]byte {
	h := sha256.New()
	_, _ = io.Copy(h, &patternReader{rng: rand.NewChaCha8([32]byte{seed}), n: n})
	var s [32]byte
	h.Sum(s[:0])
	return s
}

// TestResumeOverTCP: a client and a server with resumption on move
// resumeSize bytes each way on one stream through a proxy that resets
// every connection three times during the transfer; the session resumes
// each time and both directions arrive whole (sha256).
func TestResumeOverTCP(t *testing.T) {
	size := 64 << 20
	if raceEnabled {
		size = 8 << 20
	}
	reg := &ResumeRegistry{Identity: func(r *http.Request) string { return r.Header.Get("Authorization") }}
	scfg := DefaultConfig()
	scfg.Resume = true
	scfg.ResumeRegistry = reg
	serverSum := make(chan [32]byte, 1)
	serverErr := make(chan error, 1)
	serverSession := make(chan *Session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, scfg)
		if errors.Is(err, ErrResumed) {
			return
		}
		if err != nil {
			serverErr <- err
			return
		}
		serverSession <- s
		go func() {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				serverErr <- err
				return
			}
			go func() {
				_, _ = io.Copy(st, &patternReader{rng: rand.NewChaCha8([32]byte{2}), n: size})
				_ = st.CloseWrite()
			}()
			h := sha256.New()
			if _, err := io.Copy(h, st); err != nil {
				serverErr <- err
				return
			}
			var sum [32]byte
			h.Sum(sum[:0])
			serverSum <- sum
		}()
	}))
	defer srv.Close()
	proxy := newCutProxy(t, strings.TrimPrefix(srv.URL, "http://"))

	ccfg := DefaultConfig()
	ccfg.Resume = true
	d := Dialer{Config: ccfg, Header: http.Header{"Authorization": {"Bearer alice"}}}
	s, err := d.Dial(context.Background(), "ws://"+proxy.Addr()+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_, _ = io.Copy(st, &patternReader{rng: rand.NewChaCha8([32]byte{1}), n: size})
		_ = st.CloseWrite()
	}()
	// Cut at a quarter, a half and three quarters of what the client
	// reads.
	h := sha256.New()
	buf := make([]byte, 64<<10)
	got, cuts := 0, 0
	for {
		n, err := st.Read(buf)
		h.Write(buf[:n])
		got += n
		if cuts < 3 && got >= (cuts+1)*size/4 {
			proxy.Cut()
			cuts++
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("client Read after %d bytes, %d cuts: %v", got, cuts, err)
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	if got != size || sum != patternSum(2, size) {
		t.Fatalf("client received %d bytes, sha256 mismatch: %v", got, sum != patternSum(2, size))
	}
	select {
	case ss := <-serverSum:
		if ss != patternSum(1, size) {
			t.Fatal("server: sha256 mismatch")
		}
	case err := <-serverErr:
		t.Fatalf("server: %v", err)
	}
	if cuts != 3 {
		t.Fatalf("%d cuts", cuts)
	}
	if cs := s.Stats(); cs.Suspends < 3 || cs.Resumes != cs.Suspends {
		t.Fatalf("client: %d suspensions, %d resumes", cs.Suspends, cs.Resumes)
	}
	// Everything ends: no goroutine of either session is left, and the
	// registry forgets the server's session.
	_ = s.Close()
	ss := <-serverSession
	<-ss.Done()
	if reg.Len() != 0 {
		t.Fatalf("registry holds %d sessions after the end", reg.Len())
	}
}

// TestResumeRefused: a resume with an unknown token gets 404 and one from
// another caller 403; neither disturbs the session.
func TestResumeRefused(t *testing.T) {
	reg := &ResumeRegistry{Identity: func(r *http.Request) string { return r.Header.Get("Authorization") }}
	scfg := DefaultConfig()
	scfg.Resume = true
	scfg.ResumeRegistry = reg
	var tok string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, scfg)
		if err != nil {
			return
		}
		go func() {
			st, err := s.AcceptStream(context.Background())
			if err == nil {
				_, _ = io.Copy(st, st)
				_ = st.CloseWrite()
			}
		}()
	}))
	defer srv.Close()
	ccfg := DefaultConfig()
	ccfg.Resume = true
	d := Dialer{Config: ccfg, Header: http.Header{"Authorization": {"Bearer alice"}}}
	url := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/"
	s, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.mu.Lock()
	mu.Lock()
	tok = s.res.token
	mu.Unlock()
	s.mu.Unlock()
	if tok == "" || reg.Len() != 1 {
		t.Fatalf("token %q, registry %d", tok, reg.Len())
	}
	for _, tc := range []struct {
		auth, token string
		status      int
	}{
		{"Bearer alice", "AAAAAAAAAAAAAAAAAAAAAA", http.StatusNotFound},
		{"Bearer mallory", tok, http.StatusForbidden},
	} {
		h := http.Header{"Authorization": {tc.auth}, HeaderResumeToken: {tc.token}, HeaderResumeReceived: {"0"}}
		bad := Dialer{Config: ccfg, Header: h}
		_, err := bad.Dial(context.Background(), url)
		var he *HandshakeError
		if !errors.As(err, &he) || he.StatusCode != tc.status {
			t.Fatalf("%s with %q: %v, want %d", tc.auth, tc.token, err, tc.status)
		}
	}
	// A flood of unknown tokens is cut short with 429 (the budget, 10
	// per 10 s, counts the unknown token above); the session is not
	// disturbed.
	flood := Dialer{Config: ccfg, Header: http.Header{HeaderResumeToken: {"BBBBBBBBBBBBBBBBBBBBBB"}, HeaderResumeReceived: {"0"}}}
	var statuses []int
	for i := 0; i < 10; i++ {
		_, err := flood.Dial(context.Background(), url)
		var he *HandshakeError
		if !errors.As(err, &he) {
			t.Fatalf("flood: %v", err)
		}
		statuses = append(statuses, he.StatusCode)
	}
	for i, st := range statuses {
		want := http.StatusNotFound
		if i >= 9 {
			want = http.StatusTooManyRequests
		}
		if st != want {
			t.Fatalf("flood statuses %v: attempt %d got %d, want %d", statuses, i+1, st, want)
		}
	}
	// The session still works.
	st, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Write([]byte("still here")); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseWrite()
	b, err := io.ReadAll(st)
	if err != nil || string(b) != "still here" {
		t.Fatalf("echo %q, %v", b, err)
	}
}

// TestResumeCloseWhileSuspended: Close on a session whose connection is
// gone returns at once (it does not wait for the resume timeout); the
// server's session, suspended and never resumed, ends at its resume
// timeout with ErrResumeTimeout and leaves the registry.
func TestResumeCloseWhileSuspended(t *testing.T) {
	reg := &ResumeRegistry{}
	scfg := DefaultConfig()
	scfg.Resume = true
	scfg.ResumeRegistry = reg
	scfg.ResumeTimeout = 50 * time.Millisecond
	serverSession := make(chan *Session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, err := Upgrade(w, r, scfg); err == nil {
			serverSession <- s
		}
	}))
	defer srv.Close()
	proxy := newCutProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	ccfg := DefaultConfig()
	ccfg.Resume = true
	s, err := Dial(context.Background(), "ws://"+proxy.Addr()+"/", ccfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	proxy.StopAccepting() // redials fail from now on
	proxy.Cut()
	// Suspended (or about to be): Close ends it anyway.
	_ = s.Close()
	<-s.Done()
	ss := <-serverSession
	<-ss.Done()
	if err := ss.Err(); !errors.Is(err, engine.ErrResumeTimeout) {
		t.Fatalf("server session ended with %v, want the resume timeout", err)
	}
	if reg.Len() != 0 {
		t.Fatalf("registry holds %d sessions", reg.Len())
	}
}

// newByteCutProxy starts a proxy that cuts every connection each time the
// bytes it forwarded (both ways) cross the next of a random series of
// offsets, at most span apart: cuts land anywhere, mid-frame and
// mid-WebSocket-header included.
func newByteCutProxy(t *testing.T, target string, seed uint64, span int) *resetproxy.Proxy {
	p := newCutProxy(t, target)
	rng := rand.New(rand.NewPCG(seed, seed))
	p.CutAfter(func() int64 { return int64(1 + rng.IntN(span)) }, -1)
	return p
}

// TestResumeManyStreamsRandomCuts: 16 streams move resumeStreamSize
// bytes each way (each side half-closes after its last byte) while the
// proxy cuts every connection at random byte offsets; every stream's
// bytes arrive whole both ways (sha256) and end with EOF.
func TestResumeManyStreamsRandomCuts(t *testing.T) {
	const streams = 16
	size := 2 << 20
	if raceEnabled {
		size = 256 << 10
	}
	reg := &ResumeRegistry{}
	scfg := DefaultConfig()
	scfg.Resume = true
	scfg.ResumeRegistry = reg
	type result struct {
		seed byte
		sum  [32]byte
		err  error
	}
	serverRes := make(chan result, streams)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, scfg)
		if err != nil {
			return
		}
		go func() {
			for {
				st, err := s.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go func() {
					seed := byte(0)
					if v := st.Headers().Get("Seed"); len(v) == 1 {
						seed = v[0]
					}
					go func() {
						_, _ = io.Copy(st, &patternReader{rng: rand.NewChaCha8([32]byte{seed + 100}), n: size})
						_ = st.CloseWrite()
					}()
					h := sha256.New()
					_, err := io.Copy(h, st)
					var sum [32]byte
					h.Sum(sum[:0])
					serverRes <- result{seed, sum, err}
				}()
			}
		}()
	}))
	defer srv.Close()
	proxy := newByteCutProxy(t, strings.TrimPrefix(srv.URL, "http://"), 7, size*streams/3)
	ccfg := DefaultConfig()
	ccfg.Resume = true
	s, err := Dial(context.Background(), "ws://"+proxy.Addr()+"/", ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clientRes := make(chan result, streams)
	for i := 0; i < streams; i++ {
		seed := byte('a' + i)
		st, err := s.Open(context.Background(), http.Header{"Seed": {string(seed)}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, _ = io.Copy(st, &patternReader{rng: rand.NewChaCha8([32]byte{seed}), n: size})
			_ = st.CloseWrite()
		}()
		go func() {
			h := sha256.New()
			_, err := io.Copy(h, st)
			var sum [32]byte
			h.Sum(sum[:0])
			clientRes <- result{seed, sum, err}
		}()
	}
	for i := 0; i < streams; i++ {
		c := <-clientRes
		if c.err != nil || c.sum != patternSum(c.seed+100, size) {
			t.Fatalf("client, stream %q: %v, sha256 ok %v", c.seed, c.err, c.sum == patternSum(c.seed+100, size))
		}
		r := <-serverRes
		if r.err != nil || r.sum != patternSum(r.seed, size) {
			t.Fatalf("server, stream %q: %v, sha256 ok %v", r.seed, r.err, r.sum == patternSum(r.seed, size))
		}
	}
	cuts := proxy.Cuts()
	// A cut during a resume handshake cuts a connection that carried no
	// session yet: suspensions can be fewer than cuts.
	if st := s.Stats(); cuts < 2 || st.Resumes == 0 || st.Resumes != st.Suspends {
		t.Fatalf("%d cuts, %d suspensions, %d resumes", cuts, st.Suspends, st.Resumes)
	}
	t.Logf("%d cuts, %d MiB each way", cuts, streams*size>>20)
}

// TestResumeSendsCookies: the cookies a server (or a balancer in front of
// it) sets on the 101 go back, after the caller's own, with every resume
// of the session, as cookie affinity needs to bring the resume to the
// replica that holds it.
func TestResumeSendsCookies(t *testing.T) {
	resumes := make(chan string, 4)
	proxy := resumableEcho(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(HeaderResumeToken) != "" {
			resumes <- r.Header.Get("Cookie")
		} else {
			w.Header().Add("Set-Cookie", "replica=gw-0; Path=/; HttpOnly")
		}
	})
	ccfg := DefaultConfig()
	ccfg.Resume = true
	d := Dialer{Config: ccfg, Header: http.Header{"Cookie": {"own=1"}}}
	s, err := d.Dial(context.Background(), "ws://"+proxy.Addr()+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i > 0 {
			proxy.Cut()
			if got, want := <-resumes, "own=1; replica=gw-0"; got != want {
				t.Fatalf("resume %d sent Cookie %q, want %q", i, got, want)
			}
		}
		echoHello(t, st, i)
	}
	if cs := s.Stats(); cs.Suspends != 2 || cs.Resumes != 2 {
		t.Fatalf("%d suspensions, %d resumes, want 2 and 2", cs.Suspends, cs.Resumes)
	}
	if d.Header.Get("Cookie") != "own=1" {
		t.Fatalf("the Dialer's Header changed: Cookie %q", d.Header.Get("Cookie"))
	}
}

// TestResumeIgnoresStaleDirectWriteError: a direct write that failed on
// the lost connection leaves its error for the writer goroutine; when the
// session resumed before the writer took it, that stale error suspended
// the session again and closed the new connection (TestForwardResumesAfterCuts
// saw 4 suspensions for 3 cuts in CI). Here the error is left while the
// client redials, with the writer goroutine parked, as the race leaves it.
func TestResumeIgnoresStaleDirectWriteError(t *testing.T) {
	proxy := resumableEcho(t, nil)
	ccfg := DefaultConfig()
	ccfg.Resume = true
	resumed := make(chan struct{}, 4)
	ccfg.OnResumeEvent = func(_ *Session, ev ResumeEvent) {
		if ev.Kind == ResumeResumed { // not a suspension, a refusal or a failed redial
			resumed <- struct{}{}
		}
	}
	var s *Session
	dials := 0
	d := Dialer{Config: ccfg, NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		if dials++; dials == 2 { // the first redial (redialLoop dials one at a time)
			s.sendMu.Lock() // the writer goroutine is parked: nothing wakes it before the resume
			// (The event loop has no direct-write error.)
			if d := s.goroutines(); d != nil {
				d.directErr = errors.New("a direct write on the lost connection failed")
			}
			s.sendMu.Unlock()
		}
		var nd net.Dialer
		return nd.DialContext(ctx, network, addr)
	}}
	s, err := d.Dial(context.Background(), "ws://"+proxy.Addr()+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	st, err := s.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if i == 1 {
			// Nothing is written until the session resumed: no Write
			// wakes the writer (which would take the error while still
			// suspended, harmlessly) before it.
			proxy.Cut()
			<-resumed
		}
		echoHello(t, st, i)
	}
	if cs := s.Stats(); cs.Suspends != 1 || cs.Resumes != 1 {
		t.Fatalf("%d suspensions, %d resumes, want 1 and 1", cs.Suspends, cs.Resumes)
	}
}

// resumableEcho starts a server whose sessions resume (with a registry of
// their own) and echo every stream, behind a proxy that cuts on demand;
// before, if set, runs first for every upgrade (to look at the request or
// set headers of the 101).
func resumableEcho(t *testing.T, before func(w http.ResponseWriter, r *http.Request)) *resetproxy.Proxy {
	t.Helper()
	scfg := DefaultConfig()
	scfg.Resume, scfg.ResumeRegistry = true, &ResumeRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if before != nil {
			before(w, r)
		}
		s, err := Upgrade(w, r, scfg)
		if err != nil {
			return // ErrResumed, or a refusal the client reports
		}
		go func() {
			st, err := s.AcceptStream(context.Background())
			if err == nil {
				_, _ = io.Copy(st, st)
				_ = st.CloseWrite()
			}
		}()
	}))
	t.Cleanup(srv.Close)
	return newCutProxy(t, strings.TrimPrefix(srv.URL, "http://"))
}

// echoHello writes "hello" on st and reads it back.
func echoHello(t *testing.T, st *Stream, i int) {
	t.Helper()
	if _, err := st.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(st, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo %d: %q, %v", i, buf, err)
	}
}
