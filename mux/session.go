package mux

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/engine"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// Session is one WSMUX/1 connection: many Streams over one WebSocket. It
// implements net.Listener (Accept returns the streams the peer opens). All
// methods are safe for concurrent use.
//
// A session runs two goroutines: a reader (WebSocket messages into the
// session's engine) and a writer (batches of frames out, timers); with
// DriverFastPaths, Reads and small Writes also use the connection
// themselves (Config.Driver). Handler calls run on a bounded pool of
// further goroutines.
type Session struct {
	cfg   *Config
	conn  net.Conn
	wsc   *wsio.Conn
	epoch time.Time
	stats engine.Counters

	drv driver // moves the bytes (driver.go): one of goDriver, fastDriver, evConn

	// mu guards the engine and everything the driver keeps beside it;
	// unlock (not mu.Unlock) releases it after the engine's events were
	// dispatched.
	mu       sync.Mutex
	e        *engine.Engine
	workers  int           // handler goroutines running
	acceptCh chan struct{} // EvAccept (made by the first AcceptStream that waits)
	creditCh chan struct{} // EvCredit (made by the first Open that waits)
	deadCh   chan struct{} // closed at EvClosed
	goawayCh chan struct{} // closed at EvGoAway (made by GoAwayReceived)
	pingDone chan struct{} // closed at EvPong or EvClosed (made by Ping)

	lingering bool // the driver set the closing read deadline: leave it alone (s.mu)

	// sendMu is held by whoever builds and writes a batch: the driver's
	// writer, or a Write that sends its own small batch while the writer
	// is parked (fastDriver.kick). Lock order: sendMu before mu.
	sendMu sync.Mutex
	batch  engine.Batch // the batch being laid out and written (sendMu; the event loop's worker)

	client        bool
	upgradeHeader http.Header // the 101's (Dialer.Dial)
	goaway        bool        // EvGoAway came (s.mu)
	res           *resumer    // resumption (resume.go); nil when off

	readerDone chan struct{} // closed when the driver stops reading the connection in use
	done       chan struct{}
	closeOnce  sync.Once
}

// NewSession starts a session over conn, a connection that has completed
// its WebSocket handshake (subprotocol wsmux.v1). br, when not nil, is the
// reader the handshake used; bytes it already buffered are read first.
// client selects the role: the client masks its frames and opens odd
// stream ids. cfg nil means DefaultConfig().
//
// Most programs use Dial, Dialer.Dial or Upgrade instead.
func NewSession(conn net.Conn, br *bufio.Reader, client bool, cfg *Config) (*Session, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.forSession()
	s := &Session{
		cfg:    cfg,
		conn:   conn,
		epoch:  time.Now(),
		done:   make(chan struct{}),
		deadCh: make(chan struct{}),
		client: client,
	}
	if cfg.Resume {
		// The connection changes on resume: deadlines and Close follow
		// the one in use.
		s.res = &resumer{sc: &swapConn{c: conn}}
		s.conn = s.res.sc
	}
	kind := driverFor(cfg.Driver, conn)
	ecfg := cfg.engineConfig()
	ecfg.Splice = kind != DriverGoroutines && wsio.Vectored(conn)
	ecfg.NewStream = s.newStream
	s.e = engine.New(ecfg, client, &s.stats, 0)
	s.startDriver(kind, conn, br)
	return s, nil
}

// Client starts the client side of a session over an upgraded WebSocket
// connection (see NewSession).
func Client(conn net.Conn, cfg *Config) (*Session, error) { return NewSession(conn, nil, true, cfg) }

// Server starts the server side of a session over an upgraded WebSocket
// connection (see NewSession).
func Server(conn net.Conn, cfg *Config) (*Session, error) { return NewSession(conn, nil, false, cfg) }

func (s *Session) now() time.Duration { return time.Since(s.epoch) }

// newStream allocates a stream with its engine record inside
// (engine.Config.NewStream): one allocation per stream.
func (s *Session) newStream() *engine.Stream {
	st := &Stream{sess: s}
	st.rec.SetOwner(st)
	return &st.rec
}

// Open opens a stream with headers h and waits for the peer to accept it.
// A refusal (a Handler error on the peer) returns a *StreamError with the
// peer's code, typically REFUSED_STREAM. ctx and Config.OpenTimeout bound
// the wait, which also ends at once when the session does.
func (s *Session) Open(ctx context.Context, h http.Header) (*Stream, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.OpenTimeout)
	defer cancel()
	st, err := s.open(ctx, h)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	ack := st.ackChan()
	s.drv.reclaim()
	s.unlock()
	select {
	case <-ack:
	case <-ctx.Done():
		_ = st.Reset(frame.Cancel)
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, ErrTimeout
		}
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.unlock()
	if st.rec.Accepted() {
		return st, nil
	}
	if err := st.rec.ResetErr(); err != nil {
		return nil, err
	}
	return nil, s.e.Err()
}

// OpenEarly opens a stream with headers h without waiting for the peer's
// answer: Writes may follow at once within the initial window. A later
// refusal shows as a *StreamError from Read and Write. It waits only when
// the peer's stream credit is used up, bounded by Config.OpenTimeout.
//
// Right after the session starts, OpenEarly waits for the peer's SETTINGS
// (its first frame: half a round trip at most), since the peer's stream
// credit and windows may be below the protocol defaults.
func (s *Session) OpenEarly(h http.Header) (*Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.OpenTimeout)
	defer cancel()
	return s.open(ctx, h)
}

func (s *Session) open(ctx context.Context, h http.Header) (*Stream, error) {
	e := s.e
	s.mu.Lock()
	for {
		ok, err := e.OpenState()
		if err != nil {
			s.unlock()
			return nil, err
		}
		if ok {
			break
		}
		s.drv.reclaim()
		if s.creditCh == nil {
			s.creditCh = make(chan struct{}, 1)
		}
		credit := s.creditCh
		s.unlock()
		select {
		case <-credit:
		case <-s.deadCh:
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, ErrTimeout
			}
			return nil, ctx.Err()
		}
		s.mu.Lock()
	}
	var block []byte
	if len(h) > 0 {
		var err error
		if block, err = frame.AppendHeaderBlock(nil, h, e.PeerBlockLimits()); err != nil {
			s.unlock()
			return nil, err
		}
	}
	st := streamOf(e.Open(block, s.now()))
	s.unlock()
	return st, nil
}

// AcceptStream waits for the next stream the peer opens. It fails when ctx
// ends or the session does. With a Config.Handler it never returns a
// stream.
func (s *Session) AcceptStream(ctx context.Context) (*Stream, error) {
	e := s.e
	for {
		s.mu.Lock()
		if err := e.Err(); err != nil {
			s.unlock()
			return nil, err
		}
		if rec := e.Accept(); rec != nil {
			s.unlock()
			return streamOf(rec), nil
		}
		s.drv.reclaim()
		if s.acceptCh == nil {
			s.acceptCh = make(chan struct{}, 1)
		}
		accept := s.acceptCh
		s.unlock()
		select {
		case <-accept:
		case <-s.deadCh:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Accept waits for the next stream the peer opens (net.Listener).
func (s *Session) Accept() (net.Conn, error) {
	st, err := s.AcceptStream(context.Background())
	if err != nil {
		return nil, err
	}
	return st, nil
}

// Addr returns the local address (net.Listener).
func (s *Session) Addr() net.Addr { return s.LocalAddr() }

// LocalAddr returns the connection's local address.
func (s *Session) LocalAddr() net.Addr { return s.conn.LocalAddr() }

// RemoteAddr returns the connection's remote address.
func (s *Session) RemoteAddr() net.Addr { return s.conn.RemoteAddr() }

// Ping sends a PING and returns the round-trip time when its answer comes.
// Only one PING is outstanding at a time: concurrent calls share it. The
// session sends at most 20 PINGs and then 10 a second (a wsmux peer treats
// more as a flood), so calls beyond that wait for their turn; ctx bounds
// the wait.
func (s *Session) Ping(ctx context.Context) (time.Duration, error) {
	e := s.e
	s.mu.Lock()
	if err := e.Err(); err != nil {
		s.unlock()
		return 0, err
	}
	e.Ping(s.now())
	if s.pingDone == nil {
		s.pingDone = make(chan struct{})
	}
	ch := s.pingDone
	s.drv.reclaim()
	s.unlock()
	select {
	case <-ch:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	s.mu.Lock()
	defer s.unlock()
	if err := e.Err(); err != nil {
		return 0, err
	}
	return e.LastRTT(), nil
}

// GoAway starts a graceful shutdown: a GOAWAY tells the peer to open no new
// streams, and Open fails with ErrGoAway here too; existing streams finish.
// The session closes when the last stream ends, or after
// Config.CloseTimeout. code must be frame.NoError, the only graceful code
// (spec 9.4: a GOAWAY with any other code ends the session at once on the
// peer's side); any other code is refused with ErrGoAwayCode and nothing is
// sent.
func (s *Session) GoAway(code frame.ErrorCode) error {
	if code != frame.NoError {
		return fmt.Errorf("%w (got %s)", ErrGoAwayCode, code)
	}
	s.mu.Lock()
	defer s.unlock()
	if err := s.e.Err(); err != nil {
		return err
	}
	s.e.GoAway(code, s.now())
	return nil
}

// Close ends the session: every stream ends here (received bytes still
// buffered stay readable, then Read and Write fail with the session's
// error), GOAWAY(NO_ERROR) goes out, bytes that Writes already queued are
// still sent (the peer reads them, then EOF), then the WebSocket close, and
// the connection is closed. It returns within Config.CloseTimeout even if
// the peer never reads, and is idempotent.
func (s *Session) Close() error {
	s.mu.Lock()
	s.e.Shutdown(s.now())
	if s.res != nil {
		s.e.AbandonResume(ErrSessionClosed) // no connection to close on
	}
	s.drv.reclaim()
	s.unlock()
	s.closeOnce.Do(func() {
		t := time.NewTimer(s.cfg.CloseTimeout)
		defer t.Stop()
		select {
		case <-s.done:
		case <-t.C:
			_ = s.conn.Close() // unblocks the writer
			s.drv.connClosed()
			<-s.done
		}
	})
	<-s.done
	return nil
}

// CloseChan returns a channel closed when the session ends (for whatever
// reason); Err then tells why.
func (s *Session) CloseChan() <-chan struct{} { return s.deadCh }

// GoAwayReceived returns a channel closed when the peer sends GOAWAY: it
// takes no new streams from us (Open fails with ErrGoAway), while the
// streams it named go on to their end.
func (s *Session) GoAwayReceived() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.goawayCh == nil {
		s.goawayCh = make(chan struct{})
		if s.goaway {
			close(s.goawayCh)
		}
	}
	return s.goawayCh
}

// Done returns a channel closed once the session's goroutines have exited
// and the connection is closed.
func (s *Session) Done() <-chan struct{} { return s.done }

// Err returns nil while the session runs, then the *SessionError that ended
// it (Code NO_ERROR and Err ErrSessionClosed after Close).
func (s *Session) Err() error {
	s.mu.Lock()
	defer s.unlock()
	if err := s.e.Err(); err != nil {
		return err
	}
	return nil
}

// SetIdleTimeout closes the session (GOAWAY IDLE_TIMEOUT) after d without
// DATA or HEADERS activity either way; keepalive PINGs and window updates do
// not count. The clock restarts now; 0 turns it off.
func (s *Session) SetIdleTimeout(d time.Duration) {
	s.mu.Lock()
	s.e.SetIdleTimeout(d, s.now())
	s.unlock()
}

// NumStreams returns the number of streams not yet ended both ways.
func (s *Session) NumStreams() int {
	s.mu.Lock()
	defer s.unlock()
	return s.e.NumStreams()
}

// Stats are a session's counters. Bytes are WebSocket message payload bytes.
type Stats struct {
	BytesIn, BytesOut       uint64
	FramesIn, FramesOut     uint64
	MessagesIn, MessagesOut uint64
	StreamsOpened           uint64 // by us
	StreamsAccepted         uint64 // opened by the peer and not refused
	ResetsLocal             uint64 // RST_STREAM we sent
	ResetsRemote            uint64 // RST_STREAM we received
	// LeaderMessages counts the messages a waiting Read read from the
	// connection itself instead of the reader goroutine (leader reads:
	// no goroutine handoff between the socket and the application).
	LeaderMessages uint64
	// Suspends and Resumes count the connections a resumable session
	// lost and the times it resumed on a new one (Config.Resume);
	// ResumeFailures, the suspensions that ended the session instead
	// (resume timeout, refused, evicted, bad count).
	Suspends, Resumes, ResumeFailures uint64
	// Errors counts session and stream errors by code (those we detected
	// and those the peer reported).
	Errors map[frame.ErrorCode]uint64
}

// Stats returns a snapshot of the session's counters.
func (s *Session) Stats() Stats {
	sc := &s.stats
	return Stats{
		BytesIn: sc.BytesIn.Load(), BytesOut: sc.BytesOut.Load(),
		FramesIn: sc.FramesIn.Load(), FramesOut: sc.FramesOut.Load(),
		MessagesIn: sc.MessagesIn.Load(), MessagesOut: sc.MessagesOut.Load(),
		StreamsOpened: sc.StreamsOpened.Load(), StreamsAccepted: sc.StreamsAccepted.Load(),
		ResetsLocal: sc.ResetsLocal.Load(), ResetsRemote: sc.ResetsRemote.Load(),
		LeaderMessages: sc.LeaderMessages.Load(),
		Suspends:       sc.Suspends.Load(), Resumes: sc.Resumes.Load(),
		ResumeFailures: sc.ResumeFailures.Load(),
		Errors:         sc.Errors(),
	}
}

var _ net.Listener = (*Session)(nil)
