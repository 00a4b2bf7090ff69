package testnet

import (
	"io"
	"net"
	"sync"
	"testing"
)

// CutProxy forwards TCP connections to a target and cuts every connection
// through it (a TCP reset both ways, nothing closed cleanly) each time
// Every more bytes have moved through it, either way, up to Max cuts: a
// load balancer ending connections in the middle of a transfer.
type CutProxy struct {
	Addr  string // where to connect
	Every int64
	Max   int

	ln     net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns []net.Conn
	moved int64
	next  int64 // moved count of the next cut
	cuts  int
	dials int
}

// NewCutProxy starts a proxy to target that cuts after every bytes moved,
// max times; t's cleanup stops it and waits for its goroutines.
func NewCutProxy(t testing.TB, target string, every int64, max int) *CutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &CutProxy{Addr: ln.Addr().String(), Every: every, Max: max, ln: ln, target: target, next: every}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
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
			p.wg.Add(2)
			go func() { defer p.wg.Done(); p.pipe(u, c) }()
			go func() { defer p.wg.Done(); p.pipe(c, u) }()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		p.resetAll()
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

// pipe copies src to dst, counting, and cuts when the count says so.
func (p *CutProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			p.moved += int64(n)
			cut := p.cuts < p.Max && p.moved >= p.next
			if cut {
				p.cuts++
				p.next = p.moved + p.Every
				p.resetAll()
			}
			p.mu.Unlock()
			if cut {
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
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
func (p *CutProxy) resetAll() {
	for _, c := range p.conns {
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
	p.conns = nil
}

// SetTarget makes new connections go to target (another replica).
func (p *CutProxy) SetTarget(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.target = target
}

// Cut resets every connection now (counted as a cut).
func (p *CutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cuts++
	p.resetAll()
}

// Cuts returns how many cuts happened.
func (p *CutProxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Dials returns how many connections the proxy accepted.
func (p *CutProxy) Dials() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dials
}

// Moved returns the bytes that moved through the proxy, both ways.
func (p *CutProxy) Moved() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.moved
}
