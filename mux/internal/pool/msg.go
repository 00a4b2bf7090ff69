package pool

import (
	"math/bits"
	"sync"
	"sync/atomic"
)

// Msg is a message buffer whose bytes may outlive the read that filled it:
// the connection's reader holds one reference while the buffer is its own,
// and every run of DATA payload a stream's receive queue keeps in place
// (instead of copying it out) holds another. The last Release gives the
// buffer back to its pool; until then the reader must not write into a
// buffer it shares (Shared), and takes another.
//
// Message buffers come in power-of-two sizes from MinMsg up, one pool per
// size: a buffer released by one connection is the next buffer of another,
// instead of garbage.
type Msg struct {
	B    []byte // len == cap: the whole buffer
	refs atomic.Int32

	// Kept by the engine that retains runs of the buffer, under its
	// session's lock: how many of its queue entries refer to the buffer,
	// and its count of retained buffer bytes, which the buffer is part of
	// while Held > 0.
	Held int
	Acct *int

	cache *MsgCache // where Release keeps it, if there is room
}

// MinMsg is the smallest message buffer.
const MinMsg = 4 << 10

// msgClasses bounds the pooled sizes: MinMsg << 23 = 32 GiB, past any
// message size limit.
const msgClasses = 24

var msgPools [msgClasses]sync.Pool

// msgClass returns the class of the smallest buffer of at least n bytes.
func msgClass(n int) int {
	if n <= MinMsg {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(uint(MinMsg-1))
}

// GetMsg returns a message buffer of at least n bytes with one reference,
// the caller's, from its class's pool or new. Its contents are whatever
// they were.
func GetMsg(n int) *Msg {
	c := msgClass(n)
	if c >= msgClasses {
		m := &Msg{B: make([]byte, n)}
		m.refs.Store(1)
		return m
	}
	m, _ := msgPools[c].Get().(*Msg)
	if m == nil {
		m = &Msg{B: make([]byte, MinMsg<<c)}
	}
	m.refs.Store(1)
	return m
}

// Retain adds a reference.
func (m *Msg) Retain() { m.refs.Add(1) }

// Shared reports whether a reference other than the caller's exists.
func (m *Msg) Shared() bool { return m.refs.Load() > 1 }

// Release drops a reference; the last one gives the buffer back to its
// pool (buffers not of a class size are dropped). The caller must not use
// the buffer afterwards. A nil m is ignored.
func (m *Msg) Release() {
	if m == nil || m.refs.Add(-1) != 0 {
		return
	}
	c := msgClass(len(m.B))
	if c >= msgClasses || MinMsg<<c != len(m.B) || len(m.B) != cap(m.B) {
		return
	}
	m.Held, m.Acct = 0, nil
	if mc := m.cache; mc != nil && mc.keep(m) {
		return
	}
	m.cache = nil
	msgPools[c].Put(m)
}

// MsgCache keeps the message buffers a connection's receive queues
// released for its next messages, up to maxCached bytes of them: buffers that
// cross goroutines (the reader fills them, the streams' readers release
// them) come back to the same connection warm, instead of through the
// global pools, which a garbage collection empties. The zero value is
// ready; it is safe for concurrent use.
type MsgCache struct {
	mu    sync.Mutex
	free  []*Msg
	bytes int
}

// maxCached bounds the bytes a MsgCache keeps: a few of the largest
// batches a writer sends by default.
const maxCached = 1 << 20

// Get returns a buffer of at least n bytes with one reference, the
// caller's: the smallest cached one that is large enough if there is one
// (a connection's buffers are of a few sizes; a larger one serves as
// well), else GetMsg's. Buffers it returns come back to c when released.
func (c *MsgCache) Get(n int) *Msg {
	var m *Msg
	c.mu.Lock()
	best := -1
	for i, f := range c.free {
		if len(f.B) >= n && (best < 0 || len(f.B) < len(c.free[best].B)) {
			best = i
		}
	}
	if best >= 0 {
		m = c.free[best]
		c.bytes -= len(m.B)
		last := len(c.free) - 1
		c.free[best] = c.free[last]
		c.free[last] = nil
		c.free = c.free[:last]
	}
	c.mu.Unlock()
	if m == nil {
		m = GetMsg(n)
	}
	m.refs.Store(1)
	m.cache = c
	return m
}

// keep caches m (no references left) if there is room.
func (c *MsgCache) keep(m *Msg) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.bytes+len(m.B) > maxCached {
		return false
	}
	c.bytes += len(m.B)
	c.free = append(c.free, m)
	return true
}

// Drain gives the cached buffers back to the global pools; buffers
// released afterwards go there too until the next Get.
func (c *MsgCache) Drain() {
	c.mu.Lock()
	free := c.free
	c.free, c.bytes = nil, 0
	c.mu.Unlock()
	for _, m := range free {
		m.cache = nil
		m.refs.Store(1)
		m.Release()
	}
}
