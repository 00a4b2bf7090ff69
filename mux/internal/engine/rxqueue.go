package engine

import "github.com/wsmux/wsmux/mux/internal/pool"

// rxQueue is a stream's receive buffer: a FIFO of spans, each either a
// pooled chunk the engine copied bytes into, or a run of a received
// message's buffer kept in place (retained: no copy), which holds a
// reference to that buffer until the application has read the run. The
// ring of spans grows by doubling and is the only memory an idle queue
// keeps. Not safe for concurrent use.
type rxQueue struct {
	ring []span // ring[(head+i)&(len-1)] for i < cnt
	head int
	cnt  int
	n    int // bytes queued
}

// span is one entry of an rxQueue: the unread bytes b, which are the tail
// of chunk (copied bytes; more may be appended while it is last) or a run
// of msg (retained).
type span struct {
	b     []byte
	chunk *[]byte
	msg   *pool.Msg
}

// Len returns the bytes queued.
func (q *rxQueue) Len() int { return q.n }

func (q *rxQueue) at(i int) *span { return &q.ring[(q.head+i)&(len(q.ring)-1)] }

func (q *rxQueue) push(s span) {
	if q.cnt == len(q.ring) {
		r := make([]span, max(2*len(q.ring), 4))
		for i := 0; i < q.cnt; i++ {
			r[i] = *q.at(i)
		}
		q.ring, q.head = r, 0
	}
	*q.at(q.cnt) = s
	q.cnt++
}

// popFront drops the first span and releases what it held.
func (q *rxQueue) popFront() {
	s := q.at(0)
	if s.chunk != nil {
		pool.PutChunk(s.chunk)
	} else {
		unretain(s.msg)
	}
	*s = span{}
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.cnt--
	if q.cnt == 0 {
		q.head = 0
		if len(q.ring) > 64 { // do not keep a large ring on an idle stream
			q.ring = nil
		}
	}
}

// write appends a copy of p, filling the last chunk first.
func (q *rxQueue) write(p []byte) {
	q.n += len(p)
	for len(p) > 0 {
		var s *span
		if q.cnt > 0 {
			s = q.at(q.cnt - 1)
		}
		if s == nil || s.chunk == nil || len(*s.chunk) == cap(*s.chunk) {
			c := pool.GetChunk()
			q.push(span{chunk: c, b: *c})
			s = q.at(q.cnt - 1)
		}
		c := s.chunk
		k := copy((*c)[len(*c):cap(*c)], p)
		*c = (*c)[:len(*c)+k]
		s.b = s.b[:len(s.b)+k]
		p = p[k:]
	}
}

// retain appends p, a run of m's buffer, without copying it: the queue
// holds a reference to m until p is read (m.Retain is the caller's).
func (q *rxQueue) retain(p []byte, m *pool.Msg) {
	q.n += len(p)
	q.push(span{b: p, msg: m})
}

// read moves up to len(p) bytes into p and releases drained spans.
func (q *rxQueue) read(p []byte) int {
	n := 0
	for n < len(p) && q.cnt > 0 {
		s := q.at(0)
		k := copy(p[n:], s.b)
		n += k
		s.b = s.b[k:]
		if len(s.b) == 0 {
			q.popFront()
		}
	}
	q.n -= n
	return n
}

// reset drops everything and releases what the spans held.
func (q *rxQueue) reset() {
	for q.cnt > 0 {
		q.popFront()
	}
	q.n = 0
	q.ring = nil
}

// unretain drops a queue's reference to m, and m's bytes from its
// engine's count of retained bytes with the last one.
func unretain(m *pool.Msg) {
	m.Held--
	if m.Held == 0 && m.Acct != nil {
		*m.Acct -= len(m.B)
		m.Acct = nil
	}
	m.Release()
}
