package mux

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wsmux/wsmux/internal/wshandshake"
	"github.com/wsmux/wsmux/mux/internal/engine"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// Session resumption (docs/spec/wsmux-resume-v1.md), over every driver
// (the event loop's part is in evloop_resume.go): when the connection
// drops, the session is suspended (the engine keeps every stream), the
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
)

// DefaultMaxSuspended is ResumeRegistry.MaxSuspended's default.
const DefaultMaxSuspended = 1024

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
// whether it did. The client starts redialling.
func (s *Session) lost(now time.Duration, err error) bool {
	r := s.res
	if r == nil || (r.redial == nil && r.reg == nil) {
		return false
	}
	was := s.e.Suspended()
	if !s.e.Suspend(now) {
		return false
	}
	if !was {
		s.postResumeEvent(ResumeEvent{Suspended: true, Err: err})
	}
	r.sc.drop()
	if s.ev != nil {
		s.ev.signal(evLost) // its worker leaves the connection
	}
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

// redialLoop redials until the session resumes, the server refuses, or the
// resume timeout passes (the engine then ends the session). It stays in
// charge (busy) until the session runs: a connection that drops again
// while attach starts it finds busy set and starts no loop of its own.
func (s *Session) redialLoop() {
	r := s.res
	backoff := 50 * time.Millisecond
	for {
		s.mu.Lock()
		if !s.e.Suspended() {
			r.busy = false
			s.unlock()
			return
		}
		done := s.readerDone
		s.unlock()
		<-done // the old reader is gone: the received count is final
		s.mu.Lock()
		recv := s.e.ReceivedCount()
		tok := r.token
		s.unlock()
		ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ResumeTimeout)
		stop := make(chan struct{})
		go func() { // the session's end stops a dial in progress
			select {
			case <-s.deadCh:
				cancel()
			case <-stop:
			}
		}()
		conn, br, hdr, err := r.redial(ctx, tok, recv)
		close(stop)
		cancel()
		if err == nil {
			peer, perr := strconv.ParseUint(hdr.Get(HeaderResumeReceived), 10, 64)
			if perr != nil {
				_ = conn.Close()
				s.abandon(fmt.Errorf("mux: resume: bad %s in the server's answer", HeaderResumeReceived))
				return
			}
			s.mu.Lock()
			r.token = hdr.Get(HeaderResumeToken)
			s.unlock()
			if err := s.attach(conn, br, peer); err != nil {
				_ = conn.Close()
			}
			backoff = 50 * time.Millisecond
			continue // resumed, or dropped again already
		}
		var he *HandshakeError
		if errors.As(err, &he) && he.StatusCode != http.StatusTooManyRequests && he.StatusCode < 500 {
			s.abandon(fmt.Errorf("%w: %w", ErrResumeRefused, err))
			return
		}
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-s.deadCh:
			t.Stop()
		}
		backoff = min(2*backoff, time.Second)
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

// abandon ends a suspended session that cannot resume.
func (s *Session) abandon(err error) {
	s.mu.Lock()
	s.e.AbandonResume(err)
	s.res.busy = false
	s.unlock()
}

// attach resumes the suspended session on conn, the peer having received
// peer bytes of ours. The old reader has exited.
func (s *Session) attach(conn net.Conn, br *bufio.Reader, peer uint64) error {
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
	// A direct write that failed on the lost connection left its error
	// for the writer goroutine; if the writer had not taken it yet, it
	// would suspend the session again on this connection (sendMu held).
	s.directErr = nil
	s.readerDone = make(chan struct{})
	if s.ev != nil {
		// The worker that runs the session's next turn registers it
		// (evloop_resume.go).
		s.ev.next = &evNext{conn: conn, pre: handshakeBytes(br)}
	} else {
		s.wsc = wsio.New(conn, br, s.client, s.cfg.MaxMessageSize)
		s.leadOK = s.directWrites && wsio.Interruptible(conn)
		s.wsc.SetNotify(s.wakeWriter)
		s.wsc.SetMessageHook(s.messageHook)
	}
	if r.reg != nil {
		r.reg.unsuspend(s)
	}
	s.postResumeEvent(ResumeEvent{})
	s.unlock()
	if s.ev != nil {
		s.ev.signal(evWake)
	} else {
		go s.readLoop()
	}
	return nil
}

// ResumeRegistry is a server's table of resumable sessions, keyed by their
// tokens: Upgrade registers every session it starts with resumption on,
// and hands the connection of a resume request to the session it names.
type ResumeRegistry struct {
	// Identity returns the authenticated caller of a request; a token is
	// bound to the identity of the upgrade that received it. Nil: every
	// caller is the same.
	Identity func(*http.Request) string
	// MaxBadResumes bounds the resumes with unknown tokens one client
	// address may try per 10 s; past it they get 429. Default 10.
	MaxBadResumes int
	// MaxSuspended bounds the suspended sessions the registry keeps (a
	// suspended session holds its streams and retained bytes without a
	// connection, so the server's connection limits do not count it).
	// When one more suspends, the session suspended longest ends with
	// ErrResumeEvicted and its client's resume gets 404: a client that
	// comes back usually does so within seconds, so the oldest suspension
	// is the one least likely to resume, and the session that just
	// dropped keeps its chance. Default DefaultMaxSuspended.
	MaxSuspended int

	mu      sync.Mutex
	m       map[[32]byte]*resumeEntry
	bad     map[string]*badCount // by client host
	susp    map[*Session]uint64  // suspended sessions, by suspension number
	seq     uint64               // numbers suspensions
	evicted uint64               // sessions ended by MaxSuspended
	changed func()               // tests: called after the suspended set changed
}

// badCount counts a client's resumes with unknown tokens in a window.
type badCount struct {
	since time.Time
	n     int
}

const badResumeWindow = 10 * time.Second

// overBudget reports whether r's client is over its budget of resumes
// with unknown tokens; count: one more such resume is counted first.
func (g *ResumeRegistry) overBudget(r *http.Request, count bool) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	limit := g.MaxBadResumes
	if limit <= 0 {
		limit = 10
	}
	now := time.Now()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.bad == nil {
		g.bad = map[string]*badCount{}
	}
	for h, b := range g.bad { // old windows go: the map stays small
		if now.Sub(b.since) >= badResumeWindow {
			delete(g.bad, h)
		}
	}
	b := g.bad[host]
	if b == nil {
		if !count {
			return false
		}
		b = &badCount{since: now}
		g.bad[host] = b
	}
	if count {
		b.n++
	}
	return b.n >= limit
}

type resumeEntry struct {
	s        *Session
	identity string
}

// newToken returns a fresh token and its key.
func newToken() (string, [32]byte) {
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := base64.RawURLEncoding.EncodeToString(b[:])
	return tok, sha256.Sum256([]byte(tok))
}

func (g *ResumeRegistry) identity(r *http.Request) string {
	if g.Identity == nil {
		return ""
	}
	return g.Identity(r)
}

// register gives s a new token for the caller id.
func (g *ResumeRegistry) register(s *Session, id string) string {
	tok, _ := newToken()
	g.add(tok, s, id)
	return tok
}

// add records tok as s's token.
func (g *ResumeRegistry) add(tok string, s *Session, id string) {
	key := sha256.Sum256([]byte(tok))
	g.mu.Lock()
	if g.m == nil {
		g.m = map[[32]byte]*resumeEntry{}
	}
	g.m[key] = &resumeEntry{s: s, identity: id}
	g.mu.Unlock()
}

// set gives tok's entry its session, or drops it (s nil).
func (g *ResumeRegistry) set(tok string, s *Session) {
	key := sha256.Sum256([]byte(tok))
	g.mu.Lock()
	defer g.mu.Unlock()
	if s == nil {
		delete(g.m, key)
	} else if ent := g.m[key]; ent != nil {
		ent.s = s
	}
}

// forget drops every token of s (it ended).
func (g *ResumeRegistry) forget(s *Session) {
	g.mu.Lock()
	for k, v := range g.m {
		if v.s == s {
			delete(g.m, k)
		}
	}
	_, was := g.susp[s]
	delete(g.susp, s)
	hook := g.changed
	g.mu.Unlock()
	if was && hook != nil {
		hook()
	}
}

// suspend records that s suspended (s.mu held; lock order: s.mu, then
// the registry's). Over MaxSuspended, the session suspended longest is
// ended (by a goroutine of its own: its lock cannot be taken under s.mu).
func (g *ResumeRegistry) suspend(s *Session) {
	limit := g.MaxSuspended
	if limit <= 0 {
		limit = DefaultMaxSuspended
	}
	g.mu.Lock()
	if g.susp == nil {
		g.susp = map[*Session]uint64{}
	}
	if _, ok := g.susp[s]; ok {
		g.mu.Unlock()
		return
	}
	g.seq++
	g.susp[s] = g.seq
	s.res.suspSeq = g.seq
	var victim *Session
	var vseq uint64
	if len(g.susp) > limit {
		for v, n := range g.susp {
			if victim == nil || n < vseq {
				victim, vseq = v, n
			}
		}
		delete(g.susp, victim)
		g.evicted++
	}
	hook := g.changed
	g.mu.Unlock()
	if victim != nil {
		go victim.evict(vseq)
	}
	if hook != nil {
		hook()
	}
}

// unsuspend records that s resumed (s.mu held).
func (g *ResumeRegistry) unsuspend(s *Session) {
	g.mu.Lock()
	delete(g.susp, s)
	hook := g.changed
	g.mu.Unlock()
	if hook != nil {
		hook()
	}
}

// evict ends s if it is still in the suspension numbered seq.
func (s *Session) evict(seq uint64) {
	s.mu.Lock()
	if s.res.suspSeq == seq && s.e.Suspended() {
		s.e.AbandonResume(ErrResumeEvicted)
	}
	s.unlock()
}

// Suspended returns how many of the registry's sessions are suspended
// (a gauge for metrics).
func (g *ResumeRegistry) Suspended() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.susp)
}

// Evicted returns how many suspended sessions MaxSuspended ended.
func (g *ResumeRegistry) Evicted() uint64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.evicted
}

// Len returns how many sessions the registry holds.
func (g *ResumeRegistry) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}

// resume serves a resume request: the token is looked up by its hash (so
// no comparison of secret bytes leaks timing), the caller checked, the
// count checked, then 101 and the connection goes to the session.
func (g *ResumeRegistry) resume(w http.ResponseWriter, r *http.Request, tok string) error {
	if g.overBudget(r, false) {
		http.Error(w, "wsmux: too many resumes with unknown tokens; wait and retry", http.StatusTooManyRequests)
		return &HandshakeError{StatusCode: http.StatusTooManyRequests}
	}
	key := sha256.Sum256([]byte(tok))
	g.mu.Lock()
	ent := g.m[key]
	var s *Session
	if ent != nil {
		s = ent.s
	}
	g.mu.Unlock()
	if ent == nil {
		g.overBudget(r, true)
		w.Header().Set(headerResume, "unknown")
		http.Error(w, "wsmux: no such session here", http.StatusNotFound)
		return &HandshakeError{StatusCode: http.StatusNotFound}
	}
	if g.identity(r) != ent.identity {
		http.Error(w, "wsmux: the session belongs to another caller", http.StatusForbidden)
		return &HandshakeError{StatusCode: http.StatusForbidden}
	}
	if s == nil { // its Upgrade has not finished starting it
		http.Error(w, "wsmux: the session is starting; retry", http.StatusServiceUnavailable)
		return &HandshakeError{StatusCode: http.StatusServiceUnavailable}
	}
	recv, err := strconv.ParseUint(r.Header.Get(HeaderResumeReceived), 10, 64)
	s.mu.Lock()
	if err != nil || !s.e.ValidResumeCount(recv) {
		s.e.AbandonResume(ErrResumeCountRefused)
		s.unlock()
		http.Error(w, "wsmux: received count out of range", http.StatusConflict)
		return &HandshakeError{StatusCode: http.StatusConflict}
	}
	// The server may not have seen the old connection drop yet.
	if !s.lost(s.now(), errReplaced) && !s.e.Suspended() {
		s.unlock()
		w.Header().Set(headerResume, "unknown")
		http.Error(w, "wsmux: no such session here", http.StatusNotFound)
		return &HandshakeError{StatusCode: http.StatusNotFound}
	}
	if s.res.busy {
		s.unlock()
		http.Error(w, "wsmux: a resume of this session is under way; retry", http.StatusServiceUnavailable)
		return &HandshakeError{StatusCode: http.StatusServiceUnavailable}
	}
	s.res.busy = true
	s.unlock()
	<-s.readerDone // the old reader is gone: our count is final
	s.mu.Lock()
	ours := s.e.ReceivedCount()
	s.unlock()
	next := g.register(s, ent.identity)
	h := http.Header{}
	h.Set(HeaderResumeReceived, strconv.FormatUint(ours, 10))
	h.Set(HeaderResumeToken, next)
	conn, br, err := wshandshake.Upgrade(w, r, h)
	if err == nil {
		// tok stays valid until the client shows it has next (its first
		// message on conn): a 101 lost in a new drop can be retried.
		g.keepOnly(s, key, sha256.Sum256([]byte(next)))
		s.res.confirm, s.res.confirmKey = g, key
		err = s.attach(conn, br, recv)
		if err != nil {
			_ = conn.Close()
		}
	} else {
		g.set(next, nil)
	}
	s.mu.Lock()
	s.res.busy = false
	s.unlock()
	if err != nil {
		return err
	}
	return ErrResumed
}

// keepOnly drops every token of s but the two keys given.
func (g *ResumeRegistry) keepOnly(s *Session, a, b [32]byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for k, v := range g.m {
		if v.s == s && k != a && k != b {
			delete(g.m, k)
		}
	}
}

// confirmed retires the token a resume used once the first message came
// on the resumed connection (reader goroutine).
func (s *Session) confirmed() {
	r := s.res
	if r == nil || r.confirm == nil {
		return
	}
	g := r.confirm
	r.confirm = nil
	g.mu.Lock()
	delete(g.m, r.confirmKey)
	g.mu.Unlock()
}

// ErrResumeCountRefused ends a session whose client presented a received
// count the server cannot resume from.
var ErrResumeCountRefused = errors.New("mux: resume: the client's received count is out of range")
