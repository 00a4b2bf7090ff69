package netpoll

import (
	"sync"
	"time"
)

// linger is how long an idle worker waits for the next task before it
// exits: a busy loop's workers are not restarted between bursts (a
// goroutine start allocates), while an idle process keeps none.
const linger = 50 * time.Millisecond

// Task is work queued on a Pool.
type Task interface {
	Run()
}

// Pool runs queued Tasks on at most Max goroutines, started when tasks are
// queued and exiting when none came for a moment: an idle pool holds none.
// Tasks run in the order they were queued.
type Pool struct {
	max int

	mu      sync.Mutex
	q       []Task // ring buffer
	head, n int
	running int
	idle    int           // workers waiting for a task
	wake    chan struct{} // one token per idle worker told to go on
}

// NewPool returns a Pool of at most n goroutines (at least 1).
func NewPool(n int) *Pool {
	n = max(n, 1)
	return &Pool{max: n, wake: make(chan struct{}, n)}
}

// Submit queues t. A Task that may be submitted again while it runs (a
// session woken twice) must guard against running twice at once itself.
func (p *Pool) Submit(t Task) {
	p.mu.Lock()
	if p.n == len(p.q) {
		p.growLocked()
	}
	p.q[(p.head+p.n)%len(p.q)] = t
	p.n++
	start := false
	switch {
	case p.idle > 0:
		p.idle--
		p.wake <- struct{}{} // never blocks: at most one token per idle worker
	case p.running < p.max:
		p.running++
		start = true
	}
	p.mu.Unlock()
	if start {
		go p.work()
	}
}

func (p *Pool) growLocked() {
	q := make([]Task, max(2*len(p.q), 16))
	for i := range p.n {
		q[i] = p.q[(p.head+i)%len(p.q)]
	}
	p.q, p.head = q, 0
}

// work runs tasks until none came for linger.
func (p *Pool) work() {
	timer := time.NewTimer(linger)
	defer timer.Stop()
	for {
		p.mu.Lock()
		if p.n == 0 {
			p.idle++
			p.mu.Unlock()
			timer.Reset(linger)
			select {
			case <-p.wake:
				continue
			case <-timer.C:
			}
			p.mu.Lock()
			select {
			case <-p.wake: // a Submit chose this worker as it timed out
				p.mu.Unlock()
				continue
			default:
			}
			p.idle--
			p.running--
			if p.running == 0 && len(p.q) > 1024 {
				p.q, p.head = nil, 0 // a burst's ring does not stay
			}
			p.mu.Unlock()
			return
		}
		t := p.q[p.head]
		p.q[p.head] = nil
		p.head = (p.head + 1) % len(p.q)
		p.n--
		p.mu.Unlock()
		t.Run()
	}
}

// Running returns the number of worker goroutines now running.
func (p *Pool) Running() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running
}
