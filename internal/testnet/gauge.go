package testnet

import (
	"sync"
	"time"
)

// Gauge counts what is in progress (requests served, connections held)
// and lets a test wait for the moment none is, instead of polling.
type Gauge struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n comes to 0; nil while nobody waits
}

// Add adds d (negative to end some) and wakes the waiters when the count
// comes to zero.
func (g *Gauge) Add(d int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.n += d
	if g.n == 0 && g.zero != nil {
		close(g.zero)
		g.zero = nil
	}
}

// Len returns the count.
func (g *Gauge) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.n
}

// WaitZero waits until the count is zero, at most within, and reports
// whether it came to zero.
func (g *Gauge) WaitZero(within time.Duration) bool {
	g.mu.Lock()
	if g.n == 0 {
		g.mu.Unlock()
		return true
	}
	if g.zero == nil {
		g.zero = make(chan struct{})
	}
	zero := g.zero
	g.mu.Unlock()
	t := time.NewTimer(within)
	defer t.Stop()
	select {
	case <-zero:
		return true
	case <-t.C:
		return false
	}
}
