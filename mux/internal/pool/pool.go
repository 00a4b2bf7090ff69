package pool

import (
	"sync"

	"github.com/valyala/bytebufferpool"
)

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

// batches is the writer's own bytebufferpool.Pool, separate from the global
// one so that its calibration sees only write batches.
var batches bytebufferpool.Pool

// GetBatch returns an empty buffer for assembling one write batch
// ([ws header room][frame][frame]...). Its capacity is whatever the pool
// calibrated to; appending grows it.
func GetBatch() *bytebufferpool.ByteBuffer {
	return batches.Get()
}

// PutBatch returns a batch buffer to the pool; it must not be used
// afterwards. Do not Reset it first: the pool records its length to calibrate
// the size of new buffers and resets it itself. Buffers far larger than the
// usual batch are dropped by the pool rather than kept. A nil buffer is
// ignored.
func PutBatch(b *bytebufferpool.ByteBuffer) {
	if b == nil {
		return
	}
	batches.Put(b)
}
