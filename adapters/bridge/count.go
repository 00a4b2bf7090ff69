package bridge

import (
	"sync"
	"time"
)

// count is a WaitGroup that can be waited on with a timeout and may grow
// while it is waited on. A wait that times out leaves nothing behind (a
// WaitGroup would need a goroutine blocked in Wait until the count reaches
// zero, which for a CreateStream stuck in an SPDY upstream is never).
type count struct {
	mu   sync.Mutex
	n    int
	zero chan struct{} // closed when n reaches zero; nil while nobody waits
}

// Add adds d (which may be negative) to the count.
func (c *count) Add(d int) {
	c.mu.Lock()
	c.n += d
	if c.n < 0 {
		c.mu.Unlock()
		panic("bridge: negative count")
	}
	if c.n == 0 && c.zero != nil {
		close(c.zero)
		c.zero = nil
	}
	c.mu.Unlock()
}

// Done subtracts one.
func (c *count) Done() { c.Add(-1) }

// wait waits until the count is zero or d passed, and reports whether it
// reached zero.
func (c *count) wait(d time.Duration) bool {
	c.mu.Lock()
	if c.n == 0 {
		c.mu.Unlock()
		return true
	}
	if c.zero == nil {
		c.zero = make(chan struct{})
	}
	ch := c.zero
	c.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
		return false
	}
}
