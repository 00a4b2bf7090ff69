package bench

import (
	"net"
	"testing"
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
}

type tcpStream struct {
	*net.TCPConn
	conns *connSet
}

func (s tcpStream) Close() error {
	s.conns.remove(s.TCPConn)
	return s.TCPConn.Close()
}

func (s *tcpSession) Open() (Stream, error) {
	if s.ln != nil {
		return nil, errNotSupported
	}
	c, err := net.Dial("tcp", s.addr)
	if err != nil {
		return nil, err
	}
	if !s.conns.add(c) {
		return nil, net.ErrClosed
	}
	return tcpStream{c.(*net.TCPConn), s.conns}, nil
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
	return tcpStream{c.(*net.TCPConn), s.conns}, nil
}

func (s *tcpSession) Close() error {
	if s.ln != nil {
		s.ln.Close()
	}
	s.conns.closeAll()
	return nil
}

func tcpTransportPair(tb testing.TB) (client, server Session, cleanup func()) {
	ln := listen(tb)
	cs := &tcpSession{addr: ln.Addr().String(), conns: newConnSet()}
	ss := &tcpSession{ln: ln, conns: newConnSet()}
	return cs, ss, func() {
		cs.Close()
		ss.Close()
	}
}
