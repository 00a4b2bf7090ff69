package mux

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wsmux/wsmux/mux/internal/engine"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// Session resumption (docs/spec/wsmux-resume-v1.md), over every driver
// (the event loop's part is in driver_eventloop_resume.go), both sides:
// suspension and attach here, the client's redials in resume_client.go,
// the server's registry in resume_server.go, and the events both report
// in resume_events.go. When the connection drops, the session is suspended (the engine keeps every stream), the
// client redials with its token and its received count, the server's
// ResumeRegistry hands the new connection to the suspended session, and
// both replay what the other did not get.

// Headers of the resume handshake.
const (
	HeaderResumeToken    = "Wsmux-Resume-Token"
	HeaderResumeReceived = "Wsmux-Resume-Received"
	headerResume         = "Wsmux-Resume"
)

// ErrResumed is what Upgrade returns when the request resumed an existing
// session: there is no new session to serve.
var ErrResumed = errors.New("mux: the request resumed an existing session")

// Errors that end a suspended session that did not resume. The session's
// Err (and every stream's Read and Write) is a *SessionError wrapping one
// of them.
var (
	// ErrResumeTimeout: the session was not resumed within
	// Config.ResumeTimeout (code KEEPALIVE_TIMEOUT).
	ErrResumeTimeout = engine.ErrResumeTimeout
	// ErrResumeRefused (client): the server answered the resume with a
	// status that forbids a retry: 404 (it does not hold the session:
	// expired, restarted, another replica, or evicted), 403 (another
	// caller's credentials) or 409. The *HandshakeError is wrapped too.
	ErrResumeRefused = errors.New("mux: the server refused to resume the session; open a new one")
	// ErrResumeEvicted (server): the session was suspended longest when
	// the ResumeRegistry's MaxSuspended was reached and another session
	// suspended.
	ErrResumeEvicted = errors.New("mux: too many suspended sessions: this one, suspended longest, was ended")
	// ErrRetainedOverBound: the peer left more of our bytes
	// unacknowledged than its windows allow (ENHANCE_YOUR_CALM).
	ErrRetainedOverBound = engine.ErrRetainedOverBound
	// ErrResumeNotNegotiated: the connection was lost before the peer's
	// SETTINGS arrived, so resumption was not in effect yet (it is once
	// both endpoints' SETTINGS set RESUME) and the session ended at once,
	// as without resumption (code INTERNAL_ERROR, the connection's error
	// wrapped too): a server does not keep such a session for its client,
	// and a client does not redial one. Open a new session.
	ErrResumeNotNegotiated = engine.ErrResumeNotNegotiated
)

const defaultResumeTimeout = 30 * time.Second

// swapConn is the session's connection when it may resume: deadlines,
// addresses and Close go to the connection in use, which attach replaces.
type swapConn struct {
	mu     sync.Mutex
	c      net.Conn
	closed bool
}

func (w *swapConn) cur() net.Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.c
}

func (w *swapConn) Read(p []byte) (int, error)         { return w.cur().Read(p) }
func (w *swapConn) Write(p []byte) (int, error)        { return w.cur().Write(p) }
func (w *swapConn) LocalAddr() net.Addr                { return w.cur().LocalAddr() }
func (w *swapConn) RemoteAddr() net.Addr               { return w.cur().RemoteAddr() }
func (w *swapConn) SetDeadline(t time.Time) error      { return w.cur().SetDeadline(t) }
func (w *swapConn) SetReadDeadline(t time.Time) error  { return w.cur().SetReadDeadline(t) }
func (w *swapConn) SetWriteDeadline(t time.Time) error { return w.cur().SetWriteDeadline(t) }

// Close closes the connection in use and refuses any later one.
func (w *swapConn) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	return w.c.Close()
}

// drop closes the connection in use (it was lost) without closing w.
func (w *swapConn) drop() { _ = w.cur().Close() }

// set installs c; false when w was closed meanwhile.
func (w *swapConn) set(c net.Conn) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return false
	}
	w.c = c
	return true
}

// resumer is a resumable session's state beside the engine's.
type resumer struct {
	sc     *swapConn
	redial func(ctx context.Context, token string, received uint64) (net.Conn, *bufio.Reader, http.Header, error) // client
	token  string                                                                                                 // client: the token to present next
	reg    *ResumeRegistry
	busy   bool // s.mu: a redial or an attach is under way
	// confirm: the registry whose token confirmKey (the one the last
	// resume used) retires at the first message on the new connection;
	// set before attach starts the reader, then the reader's.
	confirm    *ResumeRegistry
	confirmKey [32]byte
	suspSeq    uint64 // s.mu: the registry's number of the current suspension (server)
	// events wait for Config.OnResumeEvent (s.mu); delivering: a
	// goroutine is delivering them (resume_events.go).
	events     []ResumeEvent
	delivering bool
}

// lost is called by the reader or the writer when the connection failed
// with err (s.mu held): it suspends the session if it can and reports
// whether it did. The client starts redialling. A session whose peer's
// SETTINGS had not arrived is not suspended: it ends here, with
// ErrResumeNotNegotiated (the caller's own ending is then a no-op).
func (s *Session) lost(now time.Duration, err error) bool {
	r := s.res
	if r == nil || (r.redial == nil && r.reg == nil) {
		return false
	}
	was := s.e.Suspended()
	if !s.e.Suspend(now) {
		// A write that found the peer's close already answered: the
		// reader's account of the end wins (writeError waits for it).
		if !errors.Is(err, wsio.ErrCloseSent) {
			s.e.LostBeforeResume(err)
		}
		return false
	}
	if !was {
		s.postResumeEvent(ResumeEvent{Kind: ResumeLost, Suspended: true, Err: err})
	}
	r.sc.drop()
	s.drv.suspended()
	if r.reg != nil {
		r.reg.suspend(s)
	}
	if r.redial != nil && !r.busy {
		r.busy = true
		go s.redialLoop()
	}
	return true
}

// unregister forgets the ended session in its ResumeRegistry (its driver,
// once the connection is closed).
func (s *Session) unregister() {
	if s.res == nil {
		return
	}
	s.mu.Lock()
	reg := s.res.reg
	s.res.reg = nil // Upgrade registers nothing after this
	s.unlock()
	if reg != nil {
		reg.forget(s)
	}
}

// isPeerEnd reports whether a read error is the peer's doing (a close, a
// WebSocket violation): the session ends, it does not suspend.
func isPeerEnd(err error) bool {
	var ce *wsio.CloseError
	var pe *wsio.ProtocolError
	return errors.As(err, &ce) || errors.As(err, &pe)
}

// Suspended reports whether the session is suspended: its connection
// dropped and it waits to be resumed (Config.Resume). Reads and Writes
// wait meanwhile.
func (s *Session) Suspended() bool {
	if s.res == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.e.Suspended()
}

// attach resumes the suspended session on conn, the peer having received
// peer bytes of ours; attempt is the client's redial that brought conn (0
// on the server). The old reader has exited.
func (s *Session) attach(conn net.Conn, br *bufio.Reader, peer uint64, attempt int) error {
	r := s.res
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	if !r.sc.set(conn) {
		return ErrSessionClosed
	}
	s.mu.Lock()
	if err := s.e.Resume(peer, s.now()); err != nil {
		s.unlock()
		return err
	}
	s.readerDone = make(chan struct{})
	s.drv.attach(conn, br)
	if r.reg != nil {
		r.reg.unsuspend(s)
	}
	s.postResumeEvent(ResumeEvent{Kind: ResumeResumed, Attempt: attempt})
	s.unlock()
	s.drv.resumed()
	return nil
}

// ErrResumeCountRefused ends a session whose client presented a received
// count the server cannot resume from.
var ErrResumeCountRefused = errors.New("mux: resume: the client's received count is out of range")
