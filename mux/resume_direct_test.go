package mux

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime/debug"
	"strings"
	"sync/atomic"
	"testing"
)

// failingConn fails the next Write once armed, closing the connection
// under it, and counts the failures that hit a Write's own batch
// (writeOwnBatch) rather than the writer goroutine's.
type failingConn struct {
	net.Conn
	armed  *atomic.Bool
	direct *atomic.Int32
}

func (c *failingConn) Write(p []byte) (int, error) {
	if c.armed.CompareAndSwap(true, false) {
		if strings.Contains(string(debug.Stack()), ".writeOwnBatch(") {
			c.direct.Add(1)
		}
		_ = c.Conn.Close()
		return 0, errors.New("test: the connection failed under this write")
	}
	return c.Conn.Write(p)
}

// failingDial is a Dialer.NetDial whose connections are failingConns.
func failingDial(armed *atomic.Bool, direct *atomic.Int32) func(context.Context, string, string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &failingConn{Conn: c, armed: armed, direct: direct}, nil
	}
}

// TestResumeDirectWriteFailure: on the fast paths a small Write that finds
// the writer parked writes its own batch; when that write is the one that
// meets the dropped connection, the session suspends and resumes as when
// the writer goroutine meets it, and the bytes of that Write arrive.
func TestResumeDirectWriteFailure(t *testing.T) {
	rs := newResumeServer(t, &ResumeRegistry{}, nil)
	var armed atomic.Bool
	var direct atomic.Int32
	cfg := DefaultConfig()
	cfg.Resume = true
	cfg.Driver = DriverFastPaths
	d := Dialer{Config: cfg, NetDial: failingDial(&armed, &direct)}
	s, echo := dialEcho(t, &d, "ws://"+rs.host()+"/")
	// After an echo the writer is parked but for rare scheduling: the
	// armed failure then hits the writer goroutine instead, which
	// suspends the session too; the test goes on until the direct write
	// met it three times.
	attempts := 0
	for b := byte('a'); direct.Load() < 3; b++ {
		if attempts++; attempts > 50 {
			t.Fatalf("in %d attempts only %d failures hit a direct write", attempts, direct.Load())
		}
		echo(b)
		armed.Store(true)
		echo(b + 100) // its batch fails; it arrives after the resume
	}
	cs := s.Stats()
	if cs.Suspends != uint64(attempts) || cs.Resumes != cs.Suspends || cs.ResumeFailures != 0 {
		t.Fatalf("%d attempts: %d suspensions, %d resumes, %d failures", attempts, cs.Suspends, cs.Resumes, cs.ResumeFailures)
	}
}

// TestResumeAckInFailedBatch: the batch that carries a stream's HEADERS
// ACK meets the dropped connection. The ACK is retained and goes out with
// the replay after the resume, so Accepted, which waits for the ACK to be
// written, must close: it stayed open for good, and a tunnel server that
// waited for it before sending stalled (TestForwardResumesAfterCuts hung
// about 1 run in 60 under load).
func TestResumeAckInFailedBatch(t *testing.T) {
	scfg := DefaultConfig()
	scfg.Resume, scfg.ResumeRegistry = true, &ResumeRegistry{}
	sessions := make(chan *Session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s, err := Upgrade(w, r, scfg); err == nil {
			sessions <- s
		}
	}))
	defer srv.Close()
	var armed atomic.Bool
	var direct atomic.Int32
	ccfg := DefaultConfig()
	ccfg.Resume = true
	d := Dialer{Config: ccfg, NetDial: failingDial(&armed, &direct)}
	cs, err := d.Dial(context.Background(), "ws://"+strings.TrimPrefix(srv.URL, "http://")+"/")
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ss := <-sessions
	defer ss.Close()
	if _, err := cs.Ping(context.Background()); err != nil { // the client's preface is out
		t.Fatal(err)
	}
	armed.Store(true) // the client's next write, the batch with the ACK, fails
	opened := make(chan error, 1)
	go func() {
		_, err := ss.Open(context.Background(), nil) // returns once the ACK came (after the resume)
		opened <- err
	}()
	st, err := cs.AcceptStream(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := <-opened; err != nil {
		t.Fatal(err)
	}
	select {
	case <-st.Accepted():
	default:
		t.Fatal("the peer has the ACK, but Accepted is still open")
	}
	if st := cs.Stats(); st.Suspends != 1 || st.Resumes != 1 {
		t.Fatalf("%d suspensions, %d resumes, want 1 and 1", st.Suspends, st.Resumes)
	}
}
