package engine

import (
	"time"

	"github.com/wsmux/wsmux/frame"
)

// ctrl is one queued control frame.
type ctrl struct {
	typ   frame.Type
	flags frame.Flags
	id    uint32
	arg   uint32
	st    *Stream
	text  string
	block []byte // HEADERS SYN: our header block (kept here, not on the stream)
	peer  bool   // induced by the peer: counts against maxUrgent
}

// ctrlQueue is a FIFO that reuses its backing array.
type ctrlQueue struct {
	q    []ctrl
	head int
}

func (q *ctrlQueue) push(e ctrl) {
	q.q, q.head = compact(q.q, q.head)
	q.q = append(q.q, e)
}
func (q *ctrlQueue) empty() bool  { return q.head == len(q.q) }
func (q *ctrlQueue) front() *ctrl { return &q.q[q.head] }
func (q *ctrlQueue) pop() {
	q.q[q.head] = ctrl{}
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
		if cap(q.q) > maxKeptCtrl {
			q.q = nil // a burst (thousands of opens) is over: do not keep its array
		}
	}
}

// maxKeptCtrl is the capacity a drained ctrlQueue keeps.
const maxKeptCtrl = 4096

func (q *ctrlQueue) clear() {
	clear(q.q)
	q.q, q.head = q.q[:0], 0
}

// keepAcks drops every entry but HEADERS ACKs, in place and in order.
func (q *ctrlQueue) keepAcks() {
	n := 0
	for _, e := range q.q[q.head:] {
		if e.typ == frame.TypeHeaders && e.flags == frame.FlagACK {
			q.q[n] = e
			n++
		}
	}
	clear(q.q[n:])
	q.q, q.head = q.q[:n], 0
}

// keepResets drops every entry but RST_STREAMs, in place and in order.
func (q *ctrlQueue) keepResets() {
	n := 0
	for _, e := range q.q[q.head:] {
		if e.typ == frame.TypeRSTStream {
			q.q[n] = e
			n++
		}
	}
	clear(q.q[n:])
	q.q, q.head = q.q[:n], 0
}

// compact moves the live part of a FIFO's array, q[head:], to its front
// when the array is full and at least half of it was popped. The queues
// reuse their arrays from the front once they drain; one that never drains
// (writers waiting in turn under sustained load) would otherwise grow its
// array by every push since it was last empty, without bound.
func compact[T any](q []T, head int) ([]T, int) {
	if head == 0 || len(q) < cap(q) || head < len(q)/2 {
		return q, head
	}
	n := copy(q, q[head:])
	clear(q[n:])
	return q[:n], 0
}

// streamQueue is a FIFO of streams that reuses its backing array.
type streamQueue struct {
	q    []*Stream
	head int
}

func (q *streamQueue) push(st *Stream) {
	q.q, q.head = compact(q.q, q.head)
	q.q = append(q.q, st)
}
func (q *streamQueue) empty() bool   { return q.head == len(q.q) }
func (q *streamQueue) peek() *Stream { return q.q[q.head] }
func (q *streamQueue) pop() *Stream {
	st := q.q[q.head]
	q.q[q.head] = nil
	q.head++
	if q.head == len(q.q) {
		q.q, q.head = q.q[:0], 0
	}
	return st
}

// rateCounter counts events in fixed windows of budgetWindow.
type rateCounter struct {
	start time.Duration
	n     int
}

// add counts one event at now and reports whether more than limit happened
// in the current window.
func (r *rateCounter) add(now time.Duration, limit int) bool {
	if now-r.start >= budgetWindow {
		r.start, r.n = now, 0
	}
	r.n++
	return r.n > limit
}

// memBudget is the per-session flow.Budget approving window growth.
type memBudget struct {
	used, limit int64
}

func (b *memBudget) Reserve(n int64) bool {
	if b.used+n > b.limit {
		return false
	}
	b.used += n
	return true
}

func (b *memBudget) Release(n int64) { b.used -= n }
