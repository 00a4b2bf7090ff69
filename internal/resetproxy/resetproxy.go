// Package resetproxy is a TCP proxy that cuts every connection through it,
// on demand or each time a number of bytes moved: a load balancer ending
// connections in the middle of a transfer, for the resumption tests and the
// conformance runner's resume-after-cut check. A cut resets both sides (the
// proxy closes with SO_LINGER 0); nothing ends cleanly.
//
// It imports nothing of the project and is for tests and test tools only.
package resetproxy

import (
	"io"
	"net"
	"sync"
)

// Proxy forwards every TCP connection it accepts to its target.
type Proxy struct {
	ln net.Listener
	wg sync.WaitGroup

	mu     sync.Mutex
	target string
	conns  []net.Conn
	gap    func() int64 // bytes to the next cut by bytes (nil: none)
	max    int          // at most this many cuts by bytes (negative: no limit)
	moved  int64
	next   int64 // moved count of the next cut by bytes
	cuts   int
	dials  int
}

// Listen starts a proxy on a loopback port that forwards to target
// (host:port). A connection the target refuses is closed.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			to := p.target
			p.mu.Unlock()
			u, err := net.Dial("tcp", to)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.dials++
			p.mu.Unlock()
			p.wg.Go(func() { p.pipe(u, c) })
			p.wg.Go(func() { p.pipe(c, u) })
		}
	})
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// CutEvery makes the proxy cut every connection each time every more
// bytes have moved through it (either way), at most max times.
func (p *Proxy) CutEvery(every int64, max int) {
	p.CutAfter(func() int64 { return every }, max)
}

// CutAfter makes the proxy cut every connection each time the bytes moved
// through it (either way) reach the next offset, gap() bytes after the
// last one (gap returns at least 1), at most max times (negative: no
// limit). The bytes up to the offset are forwarded, so a cut lands on an
// exact byte: inside a header, a frame or a message.
func (p *Proxy) CutAfter(gap func() int64, max int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.gap, p.max, p.next = gap, max, p.moved+gap()
}

// SetTarget makes new connections go to target (another replica).
func (p *Proxy) SetTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Cut resets every connection through the proxy now; new ones are still
// accepted.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	p.resetAll()
}

// Cuts returns how many cuts happened (Cut and CutEvery's).
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Dials returns how many connections the proxy accepted and forwarded.
func (p *Proxy) Dials() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}

// Moved returns the bytes that moved through the proxy, both ways.
func (p *Proxy) Moved() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.moved
}

// StopAccepting closes the listener: dials through the proxy fail from
// now on, connections already through it go on.
func (p *Proxy) StopAccepting() { _ = p.ln.Close() }

// Close stops accepting, resets every connection (not counted as a cut)
// and waits for the proxy's goroutines.
func (p *Proxy) Close() {
	p.StopAccepting()
	p.mu.Lock()
	p.resetAll()
	p.mu.Unlock()
	p.wg.Wait()
}

// pipe copies src to dst, counting, and cuts when the count says so. An
// end of src is passed on as a half-close.
func (p *Proxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			cut := p.gap != nil && (p.max < 0 || p.cuts < p.max) && p.moved+int64(n) >= p.next
			if cut {
				n = int(p.next - p.moved) // forward up to the offset, then cut
			}
			p.moved += int64(n)
			if cut {
				// Counted and moved on here, with the decision: the other
				// direction's pipe must not take the same offset for a
				// second cut before this one resets the connections.
				p.cuts++
				p.next = p.moved + p.gap()
			}
			p.mu.Unlock()
			_, werr := dst.Write(buf[:n])
			if cut {
				p.mu.Lock()
				p.resetAll()
				p.mu.Unlock()
				return
			}
			if werr != nil {
				_ = src.Close()
				return
			}
		}
		if err == io.EOF {
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			}
			return
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// resetAll resets every connection (p.mu held).
func (p *Proxy) resetAll() {
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	p.conns = nil
}
