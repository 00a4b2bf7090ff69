package pool

import "sync"

// ChunkSize is the capacity of every receive chunk: the default maximum DATA
// frame payload of WSMUX/1 (16 KiB), so one frame's payload fits one chunk.
const ChunkSize = 16 << 10

var chunks = sync.Pool{
	New: func() any {
		b := make([]byte, 0, ChunkSize)
		return &b
	},
}

// GetChunk returns a receive chunk of length 0 and capacity ChunkSize. The
// caller owns it until it hands it back with PutChunk.
func GetChunk() *[]byte {
	b := chunks.Get().(*[]byte)
	*b = (*b)[:0]
	return b
}

// PutChunk returns a chunk obtained from GetChunk to the pool. The chunk must
// not be used afterwards. A nil pointer, or a slice whose capacity is not
// ChunkSize (for example one the caller grew by appending), is dropped, so
// the pool only ever holds whole chunks.
func PutChunk(b *[]byte) {
	if b == nil || cap(*b) != ChunkSize {
		return
	}
	*b = (*b)[:0]
	chunks.Put(b)
}

// batches holds writers' batch buffers while their sessions are idle.
var batches sync.Pool

// GetBatch returns an empty batch buffer ([ws header room][frame][frame]...)
// of capacity at least need, from the pool or new. A busy writer keeps it
// from batch to batch and hands it back with PutBatch only before it sleeps,
// so an idle session holds none. (A pool that calibrates on typical sizes,
// as bytebufferpool does, drops the large buffers after runs of small
// control batches and regrows them by doubling: about 512 KiB of garbage per
// bulk batch, measured.)
func GetBatch(need int) *[]byte {
	if p, _ := batches.Get().(*[]byte); p != nil && cap(*p) >= need {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, need)
	return &b
}

// PutBatch returns a batch buffer to the pool; it must not be used
// afterwards. A nil pointer is ignored.
func PutBatch(b *[]byte) {
	if b == nil {
		return
	}
	*b = (*b)[:0]
	batches.Put(b)
}

// Segment is a run of payload bytes a writer splices into a message
// instead of copying it: Data goes after the first At bytes of the
// message's buffered part.
type Segment struct {
	At   int
	Data []byte
}
