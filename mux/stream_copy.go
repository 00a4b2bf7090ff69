package mux

import (
	"io"
	"sync"
)

// copyBufferSize is the buffer of Stream.WriteTo: four default frames, so
// one Read takes what one WebSocket message of a bulk sender usually
// carries (io.Copy's own buffer is 32 KiB, io.Discard's 8 KiB).
const copyBufferSize = 64 << 10

var copyBuffers = sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}

// WriteTo writes the stream's data to w until io.EOF, which it reports as
// success (io.WriterTo: io.Copy from a Stream calls it). It reads into one
// pooled buffer of copyBufferSize, so io.Copy and io.Discard take the
// stream's data in large Reads whatever their own buffers; a Read waiting
// for data lends that buffer to the session, which copies arriving DATA
// straight into it. It returns the first error of a Read (a reset, the
// session's end) or of w, with the bytes written before it.
func (st *Stream) WriteTo(w io.Writer) (int64, error) {
	bp := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(bp)
	buf := *bp
	var total int64
	for {
		n, rerr := st.Read(buf)
		if n > 0 {
			m, werr := w.Write(buf[:n])
			total += int64(m)
			if werr == nil && m < n {
				werr = io.ErrShortWrite
			}
			if werr != nil {
				return total, werr
			}
		}
		if rerr == io.EOF {
			return total, nil
		}
		if rerr != nil {
			return total, rerr
		}
	}
}
