package mux

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/wsmux/wsmux/internal/wshandshake"
)

// The server's side of resumption: the registry of resumable sessions,
// its budgets against token guessing, suspension and eviction, and the
// resume request that hands a new connection to a suspended session.

// DefaultMaxSuspended is ResumeRegistry.MaxSuspended's default.
const DefaultMaxSuspended = 1024

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
	// OnToken, when set, is called with the key (the SHA-256) of every
	// token the registry hands out, before the client can see it (issued
	// true: a new session's, or the next one a resume answers with), and
	// of every token it forgets (issued false). A fleet of servers records
	// there which one holds each session. It is called without the
	// registry's lock but sometimes with a session's: issued may take a
	// bounded time (it delays the 101), a forget must not block, and
	// neither may call into the registry or a session.
	OnToken func(key [32]byte, issued bool)

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
	if g.OnToken != nil {
		g.OnToken(key, true)
	}
}

// set gives tok's entry its session, or drops it (s nil).
func (g *ResumeRegistry) set(tok string, s *Session) {
	key := sha256.Sum256([]byte(tok))
	g.mu.Lock()
	if s == nil {
		delete(g.m, key)
	} else if ent := g.m[key]; ent != nil {
		ent.s = s
	}
	g.mu.Unlock()
	if s == nil && g.OnToken != nil {
		g.OnToken(key, false)
	}
}

// forget drops every token of s (it ended).
func (g *ResumeRegistry) forget(s *Session) {
	var gone [][32]byte
	g.mu.Lock()
	for k, v := range g.m {
		if v.s == s {
			delete(g.m, k)
			if g.OnToken != nil {
				gone = append(gone, k)
			}
		}
	}
	_, was := g.susp[s]
	delete(g.susp, s)
	hook := g.changed
	g.mu.Unlock()
	g.retired(gone)
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
		err = s.attach(conn, br, recv, 0)
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
	var gone [][32]byte
	g.mu.Lock()
	for k, v := range g.m {
		if v.s == s && k != a && k != b {
			delete(g.m, k)
			if g.OnToken != nil {
				gone = append(gone, k)
			}
		}
	}
	g.mu.Unlock()
	g.retired(gone)
}

// retired reports forgotten tokens to OnToken (without the registry's lock).
func (g *ResumeRegistry) retired(keys [][32]byte) {
	if g.OnToken == nil {
		return
	}
	for _, k := range keys {
		g.OnToken(k, false)
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
	if g.OnToken != nil {
		g.OnToken(r.confirmKey, false)
	}
}
