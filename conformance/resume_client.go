package conformance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// The resumption checks of a client (--listen). For the cut, the runner
// resumes as a server with the mux library's own registry (mux.Upgrade
// with Config.Resume), so the client's redial meets a real resuming
// server; what is checked is the client's side: it offers RESUME, comes
// back after a reset with the token of the 101, and loses no byte.

var resumeClientChecks = []resumeCheck{
	{name: "resume-client-offers", section: "R1", rule: "a client that resumes sets RESUME (FEATURES bit 0x1) in its SETTINGS",
		run: clientOffersResume},
	{name: "resume-client-after-cut", section: "R8", rule: "after the server resets the TCP connection mid-transfer, the client resumes with the token of the 101 and every byte arrives once, in order", echo: true,
		run: checkClientResumeAfterCut},
}

// clientOffersResume accepts the client's next connection, reads its
// SETTINGS and ends the session cleanly: PASS when it offers RESUME,
// SKIP (for this check and the next) when it does not.
func clientOffersResume(ctx context.Context, o *Options, st *resumeState) error {
	w, err := o.connect(ctx, false)
	if err != nil {
		return err
	}
	defer func() { _ = w.c.Close() }()
	_ = w.c.SetDeadline(time.Now().Add(o.Timeout))
	var set frame.Settings
	for {
		op, msg, err := w.readMessage(1 << 20)
		if err != nil {
			return fmt.Errorf("reading the client's SETTINGS: %w", err)
		}
		if op != ws.OpBinary {
			continue
		}
		f, _, err := frame.Parse(msg, nil)
		if err != nil || f.Type != frame.TypeSettings {
			return failf("the client's first frame is not SETTINGS (§2.2)")
		}
		if err := frame.ParseSettings(f.Payload, &set); err != nil {
			return failf("the client's SETTINGS: %v", err)
		}
		break
	}
	// Our SETTINGS (without RESUME), then a clean end of the session.
	var ours frame.Settings
	_ = w.writeFrame(ws.OpBinary, true, 0, frame.AppendSettings(nil, &ours), false)
	goaway, _ := frame.AppendGoAway(nil, 0, frame.NoError, "")
	_ = w.writeFrame(ws.OpBinary, true, 0, goaway, false)
	w.sendClose(ws.StatusNormalClosure)
	if v, _ := set.Get(frame.SettingFeatures); v&frame.FeatureResume == 0 {
		st.why = "the client does not negotiate RESUME (FEATURES bit 0x1 not set in its SETTINGS): resumption checks do not apply"
		return &skip{st.why}
	}
	st.negotiated = true
	return nil
}

// checkClientResumeAfterCut serves the client's next connection as a
// resumable session, opens a stream, sends 4 MiB for the client to echo
// and resets the TCP connection when half of it came back; the client
// must redial with its token and the echo must complete intact.
func checkClientResumeAfterCut(ctx context.Context, o *Options, _ *resumeState) error {
	const size = 4 << 20
	u := newUpgrades(o)
	defer u.close()
	first, err := o.accept(ctx)
	if err != nil {
		return err
	}
	u.serve(first)
	var s *mux.Session
	select {
	case s = <-u.sessions:
	case <-time.After(o.Timeout):
		return failf("no session: the client's upgrade did not complete within %v", o.Timeout)
	case <-ctx.Done():
		return ctx.Err()
	}
	if s == nil {
		return failf("the client's upgrade failed (§2.1)")
	}
	defer s.Close()
	stream, err := openRetrying(ctx, s, o.StreamHeader)
	if err != nil {
		return fmt.Errorf("opening a stream: %w", err)
	}
	_ = stream.SetDeadline(time.Now().Add(o.Timeout + 10*time.Second))
	// The client's redial is accepted while the echo waits for it.
	redialed := make(chan error, 1)
	actx, stopAccept := context.WithCancel(ctx)
	cut := false
	err = echoAcrossCut(stream, size, func() {
		cut = true
		if tc, ok := first.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // a reset, not a clean close
		}
		_ = first.Close()
		go func() {
			c, err := o.accept(actx)
			if err == nil {
				u.serve(c)
			}
			redialed <- err
		}()
	})
	// A client that never came back leaves the accept waiting: stopping
	// it closes the listener (this is the run's last check).
	stopAccept()
	if cut {
		if rerr := <-redialed; err == nil {
			err = rerr
		}
	}
	if err != nil {
		var fl *failure
		if errors.As(err, &fl) {
			fl.msg += u.refusals()
		}
		return err
	}
	if st := s.Stats(); st.Suspends != 1 || st.Resumes != 1 {
		return failf("%d suspensions and %d resumes of the runner's session, want 1 and 1%s", st.Suspends, st.Resumes, u.refusals())
	}
	return nil
}

// upgrades is the runner's resuming server for checkClientResumeAfterCut:
// one http.Server over the client's connections the runner accepted; a new
// session goes to sessions, a resume's answer to resumes.
type upgrades struct {
	cfg      *mux.Config
	sessions chan *mux.Session
	resumes  chan resumeAnswer
	conns    chan net.Conn // accepted, for the server to serve
	srv      *http.Server
	served   chan struct{} // closed when the server stopped
}

func newUpgrades(o *Options) *upgrades {
	u := &upgrades{
		cfg:      &mux.Config{Resume: true, ResumeTimeout: o.Timeout, ResumeRegistry: &mux.ResumeRegistry{}},
		sessions: make(chan *mux.Session, 1), resumes: make(chan resumeAnswer, 4),
		conns: make(chan net.Conn), served: make(chan struct{}),
	}
	u.srv = &http.Server{Handler: http.HandlerFunc(u.handle), ErrorLog: log.New(io.Discard, "", 0)}
	ln := &connQueue{conns: u.conns, closed: make(chan struct{}), addr: o.Listener.Addr()}
	go func() {
		defer close(u.served)
		_ = u.srv.Serve(ln)
	}()
	return u
}

// serve hands c to the server.
func (u *upgrades) serve(c net.Conn) {
	select {
	case u.conns <- c:
	case <-u.served:
		_ = c.Close()
	}
}

// close stops the server (hijacked connections belong to their sessions).
func (u *upgrades) close() {
	_ = u.srv.Close()
	<-u.served
}

// resumeAnswer is how the runner answered a resume request.
type resumeAnswer struct {
	status int // 0: resumed (101)
	err    error
}

func (u *upgrades) handle(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(mux.HeaderResumeToken) == "" {
		s, err := mux.Upgrade(w, r, u.cfg)
		if err != nil {
			s = nil
		}
		select {
		case u.sessions <- s:
		default: // a second new session: not this check's
			if s != nil {
				_ = s.Close()
			}
		}
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	_, err := mux.Upgrade(sw, r, u.cfg)
	select {
	case u.resumes <- resumeAnswer{sw.status, err}:
	default:
	}
}

// refusals describes the resumes the runner refused, for a failure.
func (u *upgrades) refusals() string {
	var out string
	for {
		select {
		case a := <-u.resumes:
			if a.status != 0 {
				out += fmt.Sprintf("; the runner refused a resume with %d %s (%v): the client did not send the token and count of its session (R6, R7)",
					a.status, http.StatusText(a.status), a.err)
			}
		default:
			return out
		}
	}
}

// statusWriter records the status of an HTTP answer (a refused resume).
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController hijack the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// connQueue is a listener whose connections the runner accepted itself.
type connQueue struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
	addr   net.Addr
}

func (q *connQueue) Accept() (net.Conn, error) {
	select {
	case c := <-q.conns:
		return c, nil
	case <-q.closed:
		return nil, net.ErrClosed
	}
}

func (q *connQueue) Close() error   { q.once.Do(func() { close(q.closed) }); return nil }
func (q *connQueue) Addr() net.Addr { return q.addr }
