package bench

import (
	"context"
	"crypto/tls"
	"net"
	"testing"
	"time"
)

// tcp: the ceiling of every transport here. No multiplexing: Open dials a new
// loopback TCP connection (TCP_NODELAY on, Go's default), Accept accepts it.
// CloseWrite is TCP's half-close (shutdown(SHUT_WR)), Close closes the socket.

func init() {
	Register(Transport{
		Name:        "tcp",
		Ceiling:     true,
		Description: "plain loopback TCP, one connection per stream (the ceiling)",
		MaxStreams:  ceilingMaxStreams(),
		Pair:        tcpTransportPair,
	})
}

// ceilingMaxStreams is how many streams a ceiling transport can hold open at
// once: each stream costs two file descriptors in this process (both ends),
// and some are kept for everything else.
func ceilingMaxStreams() int {
	n := fdLimit()
	if n == 0 {
		return 0
	}
	n = (n - 512) / 2
	if n < 64 {
		n = 64
	}
	return n
}

type tcpSession struct {
	ln    net.Listener // server side only
	addr  string       // client side only
	conns *connSet
	wire  *wire
}

// tcpStream is a *net.TCPConn, or a *tls.Conn over one (whose CloseWrite
// sends close_notify: the peer reads io.EOF).
type tcpStream struct {
	net.Conn
	conns *connSet
}

func (s tcpStream) CloseWrite() error { return s.Conn.(closeWriter).CloseWrite() }

func (s tcpStream) Close() error {
	s.conns.remove(s.Conn)
	return s.Conn.Close()
}

func (s *tcpSession) Open() (Stream, error) {
	if s.ln != nil {
		return nil, errNotSupported
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := s.wire.dialTLS(ctx, s.addr)
	if err != nil {
		return nil, err
	}
	return tcpStream{c, s.conns}, nil
}

func (s *tcpSession) Accept() (Stream, error) {
	if s.ln == nil {
		return nil, errNotSupported
	}
	c, err := s.ln.Accept()
	if err != nil {
		return nil, err
	}
	if !s.conns.add(c) {
		return nil, net.ErrClosed
	}
	if tc, ok := c.(*tls.Conn); ok {
		// Handshake now, as Open waits for it (the client end of a
		// tls.Conn would otherwise wait for this end's first Read).
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := tc.HandshakeContext(ctx); err != nil {
			tc.Close()
			return nil, err
		}
	}
	return tcpStream{c, s.conns}, nil
}

func (s *tcpSession) Close() error {
	if s.ln != nil {
		s.ln.Close()
	}
	s.conns.closeAll()
	return nil
}

func tcpTransportPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	cconns, sconns := newConnSet(), newConnSet()
	ln := n.wire(tb, sconns).listen(tb)
	cs := &tcpSession{addr: ln.Addr().String(), conns: cconns, wire: n.wire(tb, cconns)}
	ss := &tcpSession{ln: ln, conns: sconns}
	return cs, ss, func() {
		cs.Close()
		ss.Close()
	}
}
