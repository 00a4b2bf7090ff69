package netpoll

import "sync"

// Task is work queued on a Pool.
type Task interface {
	Run()
}

// Pool runs queued Tasks on at most Max goroutines, started when tasks are
// queued and exiting as soon as none is left: an idle pool holds none.
// Tasks run in the order they were queued.
type Pool struct {
	max int

	mu      sync.Mutex
	q       []Task // ring buffer
	head, n int
	running int
}

// NewPool returns a Pool of at most n goroutines (at least 1).
func NewPool(n int) *Pool {
	return &Pool{max: max(n, 1)}
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
	start := p.running < p.max && p.running < p.n
	if start {
		p.running++
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

// work runs tasks until the queue is empty.
func (p *Pool) work() {
	for {
		p.mu.Lock()
		if p.n == 0 {
			p.running--
			if len(p.q) > 1024 {
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
