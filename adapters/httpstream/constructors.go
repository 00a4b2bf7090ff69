package httpstream

import (
	"bufio"
	"net"
	"net/http"
	"time"

	"github.com/wsmux/wsmux/mux"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// The constructors below mirror k8s.io/streaming/pkg/httpstream/spdy (and
// k8s.io/apimachinery/pkg/util/httpstream/spdy) name for name. conn must be
// a connection whose WebSocket handshake (subprotocol wsmux.v1) is done; the
// round tripper and the response upgrader do that part.
//
// Without ...ForStreaming they return k8s.io/apimachinery types, which
// client-go's public API takes; the ...ForStreaming variants return the
// k8s.io/streaming types that in-tree code (the kubelet's cri-streaming, the
// apiserver) uses.

// NewClientConnection starts the client side of a wsmux connection.
func NewClientConnection(conn net.Conn) (apihttpstream.Connection, error) {
	return NewClientConnectionWithPings(conn, 0)
}

// NewClientConnectionWithPings is NewClientConnection with a keepalive PING
// whenever nothing was sent for pingPeriod (0: wsmux's default, 15 s).
func NewClientConnectionWithPings(conn net.Conn, pingPeriod time.Duration) (apihttpstream.Connection, error) {
	c, err := newConnection(conn, nil, true, nil, pingPeriod, nil)
	if err != nil {
		return nil, err
	}
	return compat{c}, nil
}

// NewServerConnection starts the server side of a wsmux connection;
// newStreamHandler runs (off the read loop) for every stream the client
// opens and accepts it by returning nil.
func NewServerConnection(conn net.Conn, newStreamHandler apihttpstream.NewStreamHandler) (apihttpstream.Connection, error) {
	return NewServerConnectionWithPings(conn, newStreamHandler, 0)
}

// NewServerConnectionWithPings is NewServerConnection with keepalive PINGs
// every pingPeriod of silence.
func NewServerConnectionWithPings(conn net.Conn, newStreamHandler apihttpstream.NewStreamHandler, pingPeriod time.Duration) (apihttpstream.Connection, error) {
	c, err := newConnection(conn, nil, false, nil, pingPeriod, compatHandler(newStreamHandler))
	if err != nil {
		return nil, err
	}
	return compat{c}, nil
}

// NewClientConnectionForStreaming is NewClientConnection with
// k8s.io/streaming types.
func NewClientConnectionForStreaming(conn net.Conn) (k8shttpstream.Connection, error) {
	return NewClientConnectionWithPingsForStreaming(conn, 0)
}

// NewClientConnectionWithPingsForStreaming is NewClientConnectionWithPings
// with k8s.io/streaming types.
func NewClientConnectionWithPingsForStreaming(conn net.Conn, pingPeriod time.Duration) (k8shttpstream.Connection, error) {
	c, err := newConnection(conn, nil, true, nil, pingPeriod, nil)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NewServerConnectionForStreaming is NewServerConnection with
// k8s.io/streaming types.
func NewServerConnectionForStreaming(conn net.Conn, newStreamHandler k8shttpstream.NewStreamHandler) (k8shttpstream.Connection, error) {
	return NewServerConnectionWithPingsForStreaming(conn, newStreamHandler, 0)
}

// NewServerConnectionWithPingsForStreaming is NewServerConnectionWithPings
// with k8s.io/streaming types.
func NewServerConnectionWithPingsForStreaming(conn net.Conn, newStreamHandler k8shttpstream.NewStreamHandler, pingPeriod time.Duration) (k8shttpstream.Connection, error) {
	c, err := newConnection(conn, nil, false, nil, pingPeriod, newStreamHandler)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// NewConnectionWithConfig starts either side of a wsmux connection with a
// full mux.Config (its Handler is replaced by newStreamHandler; nil accepts
// every stream). br, when not nil, holds bytes read past the handshake.
func NewConnectionWithConfig(conn net.Conn, br *bufio.Reader, client bool, cfg *mux.Config, newStreamHandler k8shttpstream.NewStreamHandler) (Connection, error) {
	c, err := newConnection(conn, br, client, cfg, 0, newStreamHandler)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// compat presents a connection with k8s.io/apimachinery types. Streams need
// no wrapping: both Stream interfaces have the same method set.
type compat struct{ c *connection }

var _ apihttpstream.Connection = compat{}

func (a compat) CreateStream(h http.Header) (apihttpstream.Stream, error) {
	s, err := a.c.CreateStream(h)
	if err != nil {
		return nil, err
	}
	return s, nil
}
func (a compat) Close() error                   { return a.c.Close() }
func (a compat) CloseChan() <-chan bool         { return a.c.CloseChan() }
func (a compat) SetIdleTimeout(d time.Duration) { a.c.SetIdleTimeout(d) }
func (a compat) Session() *mux.Session          { return a.c.sess }
func (a compat) RemoveStreams(ss ...apihttpstream.Stream) {
	conv := make([]k8shttpstream.Stream, 0, len(ss))
	for _, s := range ss {
		if s != nil {
			conv = append(conv, s)
		}
	}
	a.c.RemoveStreams(conv...)
}

// ForStreaming returns the k8s.io/streaming view of a connection made by
// this package's apimachinery-typed constructors (nil for other types).
func ForStreaming(c apihttpstream.Connection) Connection {
	if a, ok := c.(compat); ok {
		return a.c
	}
	return nil
}

func compatHandler(h apihttpstream.NewStreamHandler) k8shttpstream.NewStreamHandler {
	if h == nil {
		return nil
	}
	return func(s k8shttpstream.Stream, replySent <-chan struct{}) error { return h(s, replySent) }
}
