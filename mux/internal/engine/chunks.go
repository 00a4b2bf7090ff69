package engine

import "github.com/wsmux/wsmux/mux/internal/pool"

// chunkQueue is a FIFO of bytes held in pooled chunks of pool.ChunkSize: a
// stream's receive buffer or send queue. Chunks are taken when bytes arrive
// and given back as soon as they are drained, so an empty queue holds no
// chunk. The ring of chunk pointers grows by doubling and is the only
// memory an idle queue keeps. Not safe for concurrent use.
type chunkQueue struct {
	ring []*[]byte // ring[(head+i)%len] for i < count; each chunk's len is its fill
	head int
	cnt  int
	off  int // read offset in the first chunk
	n    int // bytes queued
}

// Len returns the bytes queued.
func (q *chunkQueue) Len() int { return q.n }

func (q *chunkQueue) at(i int) *[]byte { return q.ring[(q.head+i)&(len(q.ring)-1)] }

func (q *chunkQueue) push(c *[]byte) {
	if q.cnt == len(q.ring) {
		size := max(2*len(q.ring), 4)
		r := make([]*[]byte, size)
		for i := 0; i < q.cnt; i++ {
			r[i] = q.at(i)
		}
		q.ring, q.head = r, 0
	}
	q.ring[(q.head+q.cnt)&(len(q.ring)-1)] = c
	q.cnt++
}

func (q *chunkQueue) popFront() {
	i := q.head
	pool.PutChunk(q.ring[i])
	q.ring[i] = nil
	q.head = (q.head + 1) & (len(q.ring) - 1)
	q.cnt--
	q.off = 0
	if q.cnt == 0 {
		q.head = 0
		if len(q.ring) > 64 { // do not keep a large ring on an idle stream
			q.ring = nil
		}
	}
}

// write appends p, taking chunks as needed.
func (q *chunkQueue) write(p []byte) {
	q.n += len(p)
	for len(p) > 0 {
		var c *[]byte
		if q.cnt > 0 {
			c = q.at(q.cnt - 1)
		}
		if c == nil || len(*c) == cap(*c) {
			c = pool.GetChunk()
			q.push(c)
		}
		k := copy((*c)[len(*c):cap(*c)], p)
		*c = (*c)[:len(*c)+k]
		p = p[k:]
	}
}

// read moves up to len(p) bytes into p and releases drained chunks.
func (q *chunkQueue) read(p []byte) int {
	n := 0
	for n < len(p) && q.cnt > 0 {
		c := *q.at(0)
		k := copy(p[n:], c[q.off:])
		n += k
		q.off += k
		if q.off == len(c) {
			q.popFront()
		}
	}
	q.n -= n
	return n
}

// appendTo appends the first n queued bytes to dst and drops them.
func (q *chunkQueue) appendTo(dst []byte, n int) []byte {
	q.n -= n
	for n > 0 {
		c := *q.at(0)
		k := min(n, len(c)-q.off)
		dst = append(dst, c[q.off:q.off+k]...)
		n -= k
		q.off += k
		if q.off == len(c) {
			q.popFront()
		}
	}
	return dst
}

// frontRun returns how many queued bytes are left in the first chunk.
func (q *chunkQueue) frontRun() int {
	if q.cnt == 0 {
		return 0
	}
	return len(*q.at(0)) - q.off
}

// reset drops everything and returns the chunks to the pool.
func (q *chunkQueue) reset() {
	for q.cnt > 0 {
		q.popFront()
	}
	q.n, q.off = 0, 0
	q.ring = nil
}
