package handoff

import (
	"net"
	"sync"
)

// prefixConn reads the bytes the controller already read before the
// socket's own.
type prefixConn struct {
	net.Conn
	prefix  []byte
	remote  net.Addr
	release func() // returns the connection's slot (ConnGate)
	once    sync.Once
	closed  chan struct{}
}

func newPrefixConn(c net.Conn, prefix []byte, remote net.Addr, release func()) *prefixConn {
	return &prefixConn{Conn: c, prefix: prefix, remote: remote, release: release, closed: make(chan struct{})}
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}

func (c *prefixConn) RemoteAddr() net.Addr { return c.remote }

func (c *prefixConn) Close() error {
	first := false
	c.once.Do(func() {
		first = true
		c.release() // before the close: whoever sees it closed finds the slot free
	})
	err := c.Conn.Close()
	if first {
		close(c.closed)
	}
	return err
}

// oneConnListener accepts its connection once, then blocks until the
// connection or the listener is closed.
type oneConnListener struct {
	conn   *prefixConn
	once   sync.Once
	lonce  sync.Once
	lclose chan struct{}
}

func newOneConnListener(c *prefixConn) *oneConnListener {
	return &oneConnListener{conn: c, lclose: make(chan struct{})}
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	var c net.Conn
	l.once.Do(func() { c = l.conn })
	if c != nil {
		return c, nil
	}
	select {
	case <-l.conn.closed:
	case <-l.lclose:
	}
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.lonce.Do(func() { close(l.lclose) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return l.conn.LocalAddr() }
