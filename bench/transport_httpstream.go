package bench

import (
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"

	"k8s.io/streaming/pkg/httpstream"
)

// Sessions over a Kubernetes httpstream.Connection (k8s.io/streaming types),
// used the way port-forward uses one: the SPDY transports here, and any other
// implementation of the interface (wsmux's httpstream adapter) can reuse them:
//
//	server := newHTTPStreamServer(done)
//	sconn := <the implementation's server constructor>(..., server.handler)
//	server.conn = sconn
//	client := newHTTPStreamClient(cconn, done)
//
// Open is CreateStream with port-forward headers (streamType=data, port,
// requestID). The server's NewStreamHandler hands each stream to Accept through
// a channel of capacity 1, as cri-streaming's port-forward handler does.
// CloseWrite is the interface's Close (a half-close); Close sends that if not
// sent yet and then calls RemoveStreams, as Kubernetes does after every stream.

// newHTTPStreamServer returns the server side; set conn before use. done is
// closed by the cleanup, which releases a handler waiting for Accept.
func newHTTPStreamServer(done chan struct{}) *httpstreamSession {
	return &httpstreamSession{accept: make(chan httpstream.Stream, 1), done: done}
}

// newHTTPStreamClient returns the client side over conn.
func newHTTPStreamClient(conn httpstream.Connection, done chan struct{}) *httpstreamSession {
	return &httpstreamSession{conn: conn, done: done}
}

type httpstreamSession struct {
	conn   httpstream.Connection
	accept chan httpstream.Stream // server side only
	done   chan struct{}          // closed by cleanup
	reqID  atomic.Uint64
}

func (s *httpstreamSession) Open() (Stream, error) {
	if s.accept != nil {
		return nil, errNotSupported
	}
	h := http.Header{}
	h.Set("streamType", "data")
	h.Set("port", "8080")
	h.Set("requestID", strconv.FormatUint(s.reqID.Add(1), 10))
	st, err := s.conn.CreateStream(h)
	if err != nil {
		return nil, err
	}
	return &httpstreamStream{Stream: st, conn: s.conn}, nil
}

var errSessionClosed = errors.New("bench: session closed")

func (s *httpstreamSession) Accept() (Stream, error) {
	if s.accept == nil {
		return nil, errNotSupported
	}
	select {
	case st := <-s.accept:
		return &httpstreamStream{Stream: st, conn: s.conn}, nil
	case <-s.conn.CloseChan():
		return nil, errSessionClosed
	case <-s.done:
		return nil, errSessionClosed
	}
}

func (s *httpstreamSession) Close() error { return s.conn.Close() }

// handler is the server's NewStreamHandler: it hands the stream to Accept.
func (s *httpstreamSession) handler(st httpstream.Stream, _ <-chan struct{}) error {
	select {
	case s.accept <- st:
	case <-s.done:
		// Tearing down: accept it anyway (a rejection is logged by
		// k8s.io/streaming); Connection.Close resets it.
	}
	return nil
}

type httpstreamStream struct {
	httpstream.Stream
	conn    httpstream.Connection
	mu      sync.Mutex
	finSent bool
	closed  bool
}

// WriteTo forwards to the connection's stream where it has its own (the
// wsmux adapter's), so io.Copy takes the same path as through the bare
// interface; elsewhere it is io.Copy's.
func (s *httpstreamStream) WriteTo(w io.Writer) (int64, error) {
	if wt, ok := s.Stream.(io.WriterTo); ok {
		return wt.WriteTo(w)
	}
	return io.Copy(w, struct{ io.Reader }{s.Stream})
}

func (s *httpstreamStream) CloseWrite() error {
	s.mu.Lock()
	if s.finSent {
		s.mu.Unlock()
		return nil
	}
	s.finSent = true
	s.mu.Unlock()
	return s.Stream.Close()
}

func (s *httpstreamStream) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	fin := s.finSent
	s.finSent = true
	s.mu.Unlock()
	var err error
	if !fin {
		err = s.Stream.Close()
	}
	s.conn.RemoveStreams(s.Stream)
	return err
}
