// Package resetproxy is a TCP proxy that resets every connection through it
// on demand: the cut of the resumption tests and of the conformance runner's
// resume-after-cut check. Both sides of a reset connection see it fail (the
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
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

// Listen starts a proxy on a loopback port that forwards to target
// (host:port). A connection the target refuses is closed.
func Listen(target string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(u, c); _ = u.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, u); _ = c.Close() })
		}
	})
	return p, nil
}

// Addr returns the proxy's host:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Reset resets every connection through the proxy; new ones are still
// accepted.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	p.conns = nil
}

// StopAccepting closes the listener: dials through the proxy fail from
// now on, connections already through it go on.
func (p *Proxy) StopAccepting() { _ = p.ln.Close() }

// Close stops accepting, resets every connection and waits for the
// proxy's goroutines.
func (p *Proxy) Close() {
	p.StopAccepting()
	p.Reset()
	p.wg.Wait()
}
