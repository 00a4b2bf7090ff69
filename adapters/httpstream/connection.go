package httpstream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wsmux/wsmux/mux"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// CreateStreamTimeout bounds CreateStream's wait for the peer's answer, as
// the SPDY adapter's createStreamResponseTimeout does. Unlike SPDY, the wait
// also ends at once when the connection dies.
const CreateStreamTimeout = 30 * time.Second

// acceptFlushTimeout bounds Close's wait for queued stream acceptances.
const acceptFlushTimeout = 5 * time.Second

// Connection is the k8s.io/streaming httpstream.Connection over a wsmux
// session. Session exposes the session (statistics, Ping, GoAway).
type Connection interface {
	k8shttpstream.Connection
	Session() *mux.Session
}

// connection implements k8s.io/streaming/pkg/httpstream.Connection.
type connection struct {
	sess      *mux.Session
	handler   k8shttpstream.NewStreamHandler
	closeChan chan bool
	closeOnce sync.Once

	mu      sync.Mutex
	streams map[uint32]*stream
}

var _ k8shttpstream.Connection = (*connection)(nil)

// sessionConfig copies cfg (nil: defaults) and applies the ping period.
func sessionConfig(cfg *mux.Config, pingPeriod time.Duration) *mux.Config {
	var c mux.Config
	if cfg != nil {
		c = *cfg
	}
	if pingPeriod > 0 {
		c.KeepAliveInterval = pingPeriod
		if c.KeepAliveTimeout == 0 && 3*pingPeriod > mux.DefaultConfig().KeepAliveTimeout {
			c.KeepAliveTimeout = 3 * pingPeriod
		}
	}
	return &c
}

// newConnection starts a session over an upgraded WebSocket connection (br,
// when not nil, holds bytes read past the handshake). handler nil accepts
// every peer stream, as SPDY's client does.
func newConnection(conn net.Conn, br *bufio.Reader, client bool, cfg *mux.Config, pingPeriod time.Duration, handler k8shttpstream.NewStreamHandler) (*connection, error) {
	c, scfg := prepareConnection(cfg, pingPeriod, handler)
	sess, err := mux.NewSession(conn, br, client, scfg)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	c.start(sess)
	return c, nil
}

// prepareConnection returns a connection not yet started and the session
// configuration whose Handler feeds it (for the session start gives it).
func prepareConnection(cfg *mux.Config, pingPeriod time.Duration, handler k8shttpstream.NewStreamHandler) (*connection, *mux.Config) {
	if handler == nil {
		handler = k8shttpstream.NoOpNewStreamHandler
	}
	c := &connection{
		handler:   handler,
		closeChan: make(chan bool),
		streams:   map[uint32]*stream{},
	}
	scfg := sessionConfig(cfg, pingPeriod)
	scfg.Handler = c.onStream
	return c, scfg
}

// start attaches the session of a prepared connection.
func (c *connection) start(sess *mux.Session) {
	c.sess = sess
	go func() {
		<-sess.CloseChan()
		c.markClosed()
	}()
}

// onStream runs for every stream the peer opens (off the read loop).
func (c *connection) onStream(st *mux.Stream) error {
	s := c.wrap(st, nil)
	// Registered before the handler runs, so that a Close racing with the
	// handler's return still waits for the acceptance to go out.
	c.register(s)
	if err := c.handler(s, st.Accepted()); err != nil {
		c.RemoveStreams(s)
		return err
	}
	return nil
}

func (c *connection) wrap(st *mux.Stream, local http.Header) *stream {
	s := &stream{st: st, conn: c, local: local}
	switch s.Headers().Get("streamType") {
	case "error", "resize", "stdin":
		// exec's small, latency-sensitive streams
		st.SetInteractive(true)
	}
	return s
}

func (c *connection) register(s *stream) {
	c.mu.Lock()
	c.streams[s.Identifier()] = s
	c.mu.Unlock()
}

// Session returns the underlying session.
func (c *connection) Session() *mux.Session { return c.sess }

// CreateStream opens a stream and waits (at most CreateStreamTimeout, and
// never past the connection's end) for the peer's NewStreamHandler to accept
// it. A rejection returns an error.
func (c *connection) CreateStream(headers http.Header) (k8shttpstream.Stream, error) {
	ctx, cancel := context.WithTimeout(context.Background(), CreateStreamTimeout)
	defer cancel()
	if headers == nil {
		headers = http.Header{}
	}
	st, err := c.sess.Open(ctx, headers)
	if err != nil {
		var se *mux.StreamError
		if errors.As(err, &se) && se.Remote {
			return nil, fmt.Errorf("stream rejected by the peer: %w", err)
		}
		return nil, err
	}
	s := c.wrap(st, headers.Clone())
	c.register(s)
	return s, nil
}

// Close resets every stream it still tracks and closes the session. Data
// already written is sent first (the peer reads it, then EOF), so an exit
// status written just before Close is not lost. It returns within the
// session's CloseTimeout.
func (c *connection) Close() error {
	c.mu.Lock()
	streams := c.streams
	c.streams = map[uint32]*stream{}
	c.mu.Unlock()
	// A stream the peer opened and our handler accepted may still have its
	// acceptance queued; closing the session now would drop it and fail the
	// peer's CreateStream although we accepted. Wait (bounded) for those.
	ctx, cancel := context.WithTimeout(context.Background(), acceptFlushTimeout)
	defer cancel()
	for _, s := range streams {
		if s.local == nil {
			select {
			case <-s.st.Accepted():
			case <-ctx.Done():
			case <-c.sess.CloseChan():
			}
		}
	}
	for _, s := range streams {
		_ = s.Reset()
	}
	err := c.sess.Close()
	c.markClosed() // CloseChan is closed once Close returns
	return err
}

func (c *connection) markClosed() { c.closeOnce.Do(func() { close(c.closeChan) }) }

// CloseChan is closed when the connection ends, for whatever reason.
func (c *connection) CloseChan() <-chan bool { return c.closeChan }

// SetIdleTimeout closes the connection after timeout without DATA or HEADERS
// activity (keepalive pings do not count). Zero turns it off.
func (c *connection) SetIdleTimeout(timeout time.Duration) { c.sess.SetIdleTimeout(timeout) }

// RemoveStreams forgets streams by their Identifier (wrappers and nil are
// fine); a removed stream keeps working but Close no longer resets it.
func (c *connection) RemoveStreams(streams ...k8shttpstream.Stream) {
	c.mu.Lock()
	for _, s := range streams {
		if s != nil {
			delete(c.streams, s.Identifier())
		}
	}
	c.mu.Unlock()
}

// stream implements k8s.io/streaming/pkg/httpstream.Stream (and, having the
// same method set, k8s.io/apimachinery's).
type stream struct {
	st    *mux.Stream
	conn  *connection
	local http.Header // the headers we created it with; nil for peer streams
}

// Read reads the stream. After the data the peer sent, Read returns io.EOF
// whether the peer half-closed, reset the stream or closed the connection,
// as SPDY streams do.
func (s *stream) Read(p []byte) (int, error) {
	n, err := s.st.Read(p)
	if err != nil && err != io.EOF && isEnd(err) && !s.lost(err) {
		err = io.EOF
	}
	return n, err
}

// WriteTo writes the stream's data to w until its end (io.WriterTo, so
// io.Copy takes mux.Stream's large reads); the stream's end is success
// where Read would report io.EOF, and w's errors are returned as they are.
func (s *stream) WriteTo(w io.Writer) (int64, error) {
	ew := errWriter{w: w}
	n, err := s.st.WriteTo(&ew)
	if err != nil && ew.err == nil && isEnd(err) && !s.lost(err) {
		err = nil
	}
	return n, err
}

// errWriter remembers the error of its writer, so WriteTo tells it from
// the stream's.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	n, err := e.w.Write(p)
	if err != nil {
		e.err = err
	}
	return n, err
}

// lost reports whether err is the end of a session whose connection was
// lost for good (a session that was suspended, then failed: its resume
// was refused or timed out): a Read reports it, so that client-go does not take the end of the
// output for the command's end (exit status 0).
func (s *stream) lost(err error) bool {
	return errors.Is(err, mux.ErrResumeRefused) || errors.Is(err, mux.ErrResumeTimeout) ||
		errors.Is(err, mux.ErrResumeEvicted) || errors.Is(err, mux.ErrResumeCountRefused)
}

func isEnd(err error) bool {
	var se *mux.StreamError
	return errors.As(err, &se) || errors.Is(err, mux.ErrStreamClosed) || errors.Is(err, mux.ErrSessionClosed)
}

// Write writes to the stream; it blocks while the peer's flow-control
// credit is used up.
func (s *stream) Write(p []byte) (int, error) { return s.st.Write(p) }

// Close half-closes the stream: the peer reads EOF after the data written so
// far and may still write back.
func (s *stream) Close() error { return s.st.CloseWrite() }

// Reset ends both directions: what was written is still delivered, then the
// peer reads EOF and its Writes fail; local Reads return EOF and Writes fail.
// (A wsmux RST_STREAM would drop queued data; SPDY writes synchronously, so
// its Reset never loses written data, and Kubernetes relies on that.)
func (s *stream) Reset() error {
	_ = s.st.CloseWrite()
	_ = s.st.CloseRead()
	return nil
}

// Headers returns the stream's headers: the ones it was created with, for
// both ends.
func (s *stream) Headers() http.Header {
	if s.local != nil {
		return s.local
	}
	return s.st.Headers()
}

// Identifier returns the stream id: odd for client streams, even for server
// streams.
func (s *stream) Identifier() uint32 { return s.st.ID() }

// MuxStream returns the underlying wsmux stream (deadlines, SetInteractive,
// a coded Reset).
func (s *stream) MuxStream() *mux.Stream { return s.st }
