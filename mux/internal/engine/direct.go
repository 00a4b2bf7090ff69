package engine

import (
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
)

// AppendDirect is AppendBatch for a Write of p on st that will wait until
// the batch is written: after whatever AppendBatch lays out, DATA frames of
// st are taken straight from p (spliced when the engine splices and the
// frames go out unmasked, else copied into dst) instead of from the send
// queue, so the bytes skip the queue's copy. It returns the batch and how many bytes of p it carries;
// the caller writes the batch before p may change (and then calls
// ReleaseSpliced), and queues the rest of p with Write.
//
// It takes nothing from p unless the scheduler would send p next anyway:
// st has nothing queued and may still write, everything else that was
// ready fit in the batch, and no other stream has data ready.
func (e *Engine) AppendDirect(dst []byte, st *Stream, p []byte, now time.Duration) ([]byte, int) {
	start := max(len(dst)-e.prefaceLen, 0)
	dst = e.AppendBatch(dst, now)
	if e.WriteErr(st) != nil || !e.gotSettings || st.txq.Len() > 0 || !e.urgent.empty() || !e.credit.empty() ||
		e.lists[0].head != nil || e.lists[1].head != nil {
		return dst, 0
	}
	limit := start + e.batchLimit()
	n, frames := 0, 0
	for n < len(p) {
		k := min(len(p)-n, st.tx.avail(), e.sessSend.avail(), e.peerMaxData, limit-e.batchLen(dst)-frame.HeaderSize)
		if k <= 0 {
			break
		}
		dst, _ = frame.AppendDataHeader(dst, st.id, false, k)
		if e.splice != nil && !e.client && k >= minSplice {
			// (A client masks what it sends in place: p must not be
			// spliced, it would be masked under the caller.)
			e.splice.segs = append(e.splice.segs, pool.Segment{At: len(dst), Data: p[n : n+k]})
			e.splice.n += k
		} else {
			dst = append(dst, p[n:n+k]...)
		}
		st.tx.Consume(k)
		e.sessSend.Consume(k)
		st.bytes += int64(k)
		n += k
		frames++
	}
	if n > 0 {
		e.lastActivity, e.lastSend = now, now
		e.stats.FramesOut.Add(uint64(frames))
		e.checkStall(now)
	}
	return dst, n
}
