package engine

import (
	"time"

	"github.com/wsmux/wsmux/mux/internal/pool"
)

// The driver's contract for what goes out, the same for every driver:
//
//  1. NextBatch (the session's lock held) runs the timers and lays out the
//     next batch. When it reports ConnLost, nothing was laid out yet: the
//     driver suspends the session or calls FailConnLost, then calls
//     NextBatch again, which lays the batch out.
//  2. The driver writes Frames, with Segs spliced in (no lock: one batch
//     is in flight at a time).
//  3. BatchWritten, whether the write succeeded or failed, gives the
//     spliced chunks back and counts the batch's HEADERS ACKs as out
//     (the session's lock held when HasAcks).

// Batch is one batch of frames for the driver to write, with what the
// driver needs around the write. One Batch is reused from batch to batch.
type Batch struct {
	// Set by the driver before NextBatch.

	// Preface: lay out our SETTINGS first (the session's first batch);
	// NextBatch clears it.
	Preface bool
	// Direct: a batch a Write lays out and writes itself, between the
	// driver's own: no preface, no timers; of what follows only Frames,
	// Segs, SplicedLen and More are set.
	Direct bool
	// Partial, PartialSince: the driver's account of the message being
	// received (SetPartial), for the read timeout.
	Partial      bool
	PartialSince time.Duration

	// Set by NextBatch.

	// Frames is dst with the batch's frames appended.
	Frames []byte
	// Segs are the DATA runs the batch takes from their send chunks
	// without copying (Config.Splice), SplicedLen their byte count.
	Segs       []pool.Segment
	SplicedLen int
	// ConnLost: the timers found the connection dead while resumption is
	// in effect (LostErr says how); no batch was laid out.
	ConnLost bool
	LostErr  error
	// Dead: the session ended. Finished: and it has nothing more it could
	// send: the driver closes the connection after this batch.
	Dead, Finished bool
	// Wait is when the timers must run next, relative to now (-1: none;
	// not set for a Direct batch). CloseBy is a closing session's flush
	// deadline (0: none).
	Wait, CloseBy time.Duration
	// More: there is more to lay out than fitted, or a stall began (the
	// driver's own loop must run again).
	More bool

	acks   []*Stream // HEADERS ACKs the batch carries
	ticked bool      // the timers ran: a ConnLost batch is laid out next
}

// HasAcks reports whether b carries HEADERS ACKs: BatchWritten then needs
// the session's lock.
func (b *Batch) HasAcks() bool { return len(b.acks) > 0 }

// DropAcks forgets b's ACKs: the driver left its connection with b
// unwritten (the next batch would replace them).
func (b *Batch) DropAcks() {
	clear(b.acks)
	b.acks = b.acks[:0]
}

// NextBatch lays out the next batch after dst (the caller reserved the
// WebSocket header room in it), running the timers first unless b is
// Direct. See Batch for what it reports.
func (e *Engine) NextBatch(b *Batch, dst []byte, now time.Duration) {
	if b.Preface {
		dst = e.appendPreface(dst, now)
		b.Preface = false
	}
	timers := !b.Direct
	if timers && !b.ticked {
		e.SetPartial(b.PartialSince, b.Partial)
		e.Tick(now)
		if lost, err := e.TakeConnLost(); lost {
			b.Frames, b.ConnLost, b.LostErr, b.ticked = dst, true, err, true
			return
		}
	}
	b.ConnLost, b.LostErr, b.ticked = false, nil, false
	b.Frames = e.appendBatch(dst, now)
	b.acks = e.takeAcked(b.acks[:0])
	b.Segs, b.SplicedLen = e.spliced()
	if timers {
		b.Dead = e.err != nil
		b.Finished = b.Dead && e.flushDone()
		b.Wait = e.NextTimer(now)
		b.CloseBy = e.closeBy
	}
	b.More = e.pending()
}

// BatchWritten ends b after its write, which succeeded or failed: its
// spliced chunks go back to their pool and its ACKs count as out (a
// resumable session retained the batch and replays it, in order, before
// anything laid out later; any other session ends after a failed write).
// It needs the session's lock only when b.HasAcks().
func (e *Engine) BatchWritten(b *Batch) {
	e.releaseSpliced()
	b.Segs, b.SplicedLen = nil, 0
	if len(b.acks) > 0 {
		e.acksWritten(b.acks)
		clear(b.acks)
		b.acks = b.acks[:0]
	}
}

// The steps of a batch, in the order NextBatch and BatchWritten take them.

// pending reports whether appendBatch has more to lay out, or a stall
// began (NextTimer changed).
func (e *Engine) pending() bool {
	if e.rs.suspended {
		return false
	}
	return e.rs.replaying() || (e.err == nil && e.rs.ackDue()) || e.lists[0].head != nil || e.lists[1].head != nil || !e.urgent.empty() || !e.credit.empty() || e.stalled
}

// takeAcked appends to dst the peer streams whose HEADERS ACK the last
// batch carried; once the batch is written the driver passes them to
// acksWritten.
func (e *Engine) takeAcked(dst []*Stream) []*Stream {
	dst = append(dst, e.ackedList...)
	clear(e.ackedList)
	e.ackedList = e.ackedList[:0]
	return dst
}

// acksWritten emits EvAnswered for streams whose ACK was written.
func (e *Engine) acksWritten(sts []*Stream) {
	for _, st := range sts {
		e.answer(st)
	}
}

// spliced returns the send chunks the last batch took without copying
// (Config.Splice) and their byte count; the driver writes them with the
// batch, then BatchWritten releases them. It needs no lock: only the goroutine
// that laid out the batch touches them until the release.
func (e *Engine) spliced() ([]pool.Segment, int) {
	if e.splice == nil {
		return nil, 0
	}
	return e.splice.segs, e.splice.n
}

// releaseSpliced returns the spliced chunks to the pool.
func (e *Engine) releaseSpliced() {
	if e.splice != nil {
		e.splice.release()
	}
}
