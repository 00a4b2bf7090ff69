package engine

import (
	"time"

	"github.com/wsmux/wsmux/frame"
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

// batchLimit is the largest batch payload: MaxBatch and the peer's message
// size, whichever is smaller.
func (e *Engine) batchLimit() int {
	return min(e.cfg.MaxBatch, e.peerMaxMsg)
}

// appendBatch lays out everything ready, up to batchLimit bytes after
// dst's current length (the caller reserved the WebSocket header room in
// dst): the urgent queue (PING ACK, RST_STREAM, STOP_SENDING, GOAWAY, and
// our HEADERS SYN, which must precede any RST_STREAM of its stream), then
// the credit queue (WINDOW_UPDATE, MAX_STREAMS, HEADERS ACK), then DATA
// (only once the peer's SETTINGS arrived) scheduled
// round-robin (one frame of at most the peer's MaxDataPayload per visit: a
// deficit round-robin whose quantum is one frame, since DATA splits
// anywhere) over ready streams, the interactive class first with an aging
// rule so bulk is never starved. Headers ACKs laid out are recorded in
// ackedList.
func (e *Engine) appendBatch(dst []byte, now time.Duration) []byte {
	// The preface, when the caller just laid it out in dst, is part of
	// this message and counts against the peer's MaxMessageSize.
	start := max(len(dst)-e.prefaceLen, 0)
	e.prefaceLen = 0
	if e.rs.suspended {
		return dst // no connection: nothing goes out until Resume
	}
	if e.rs.replaying() {
		// A resumed session sends again what the peer did not get,
		// one retained message per batch, before anything new.
		e.lastSend = now
		return e.rs.appendReplay(dst)
	}
	if e.rs.prefaceOwed {
		e.rs.prefaceOwed = false
		start = len(dst)
		dst = e.appendSettings(dst)
		e.prefaceLen = 0
	}
	limit := start + e.batchLimit()
	frames := 0
	for !e.urgent.empty() {
		ent := e.urgent.front()
		if len(dst) > start && len(dst)+frame.HeaderSize+ent.size() > limit {
			break
		}
		dst = e.appendCtrl(dst, ent)
		frames++
		if ent.peer {
			e.peerUrg--
		}
		if ent.typ == frame.TypePing && ent.flags == frame.FlagACK {
			e.pingAcks--
		}
		e.urgent.pop()
	}
	if e.err != nil {
		if e.flushing && e.urgent.empty() {
			dst, frames = e.appendCredit(dst, start, limit, frames)
			if e.credit.empty() && e.gotSettings {
				dst, frames = e.appendData(dst, limit, frames, now)
			}
		}
	} else if e.urgent.empty() {
		dst, frames = e.appendCredit(dst, start, limit, frames)
		if e.credit.empty() && e.gotSettings {
			// No DATA before the peer's SETTINGS: its windows may be
			// smaller than the defaults.
			dst, frames = e.appendData(dst, limit, frames, now)
		}
	}
	if len(dst) > start {
		e.lastSend = now
		e.stats.FramesOut.Add(uint64(frames))
		if e.rs.on {
			var segs []pool.Segment
			if e.splice != nil {
				segs = e.splice.segs
			}
			e.rs.retain(dst, start, segs)
		}
	}
	e.checkStall(now)
	return dst
}

// appendCredit lays out the credit queue (WINDOW_UPDATE, MAX_STREAMS,
// HEADERS ACK) as far as the batch allows.
func (e *Engine) appendCredit(dst []byte, start, limit, frames int) ([]byte, int) {
	if len(dst) == start || len(dst)+frame.HeaderSize <= limit {
		dst = e.appendReceived(dst)
	}
	for !e.credit.empty() {
		ent := e.credit.front()
		if len(dst) > start && len(dst)+frame.HeaderSize > limit {
			break
		}
		dst = e.appendCtrl(dst, ent)
		frames++
		e.credit.pop()
	}
	return dst, frames
}

func (e *ctrl) size() int {
	switch e.typ {
	case frame.TypeHeaders:
		return len(e.block)
	case frame.TypeRSTStream, frame.TypeGoAway:
		return len(e.text)
	}
	return 0
}

// appendCtrl appends one control frame. Entries that lost their purpose
// (a WINDOW_UPDATE or ACK for a stream that ended) append nothing.
func (e *Engine) appendCtrl(dst []byte, ent *ctrl) []byte {
	switch ent.typ {
	case frame.TypePing:
		return frame.AppendPing(dst, ent.flags == frame.FlagACK, ent.arg)
	case frame.TypeRSTStream:
		b, _ := frame.AppendRSTStream(dst, ent.id, frame.ErrorCode(ent.arg), ent.text)
		return b
	case frame.TypeStopSending:
		b, _ := frame.AppendStopSending(dst, ent.id, frame.ErrorCode(ent.arg))
		return b
	case frame.TypeGoAway:
		b, _ := frame.AppendGoAway(dst, ent.id, frame.ErrorCode(ent.arg), ent.text)
		return b
	case frame.TypeHeaders:
		st := ent.st
		if ent.flags == frame.FlagSYN {
			b, _ := frame.AppendHeadersBlock(dst, ent.id, frame.FlagSYN, ent.block)
			ent.block = nil
			return b
		}
		if st.resetErr != nil {
			return dst
		}
		b, _ := frame.AppendHeadersBlock(dst, ent.id, frame.FlagACK, nil)
		e.ackedList = append(e.ackedList, st)
		return b
	case frame.TypeWindowUpdate:
		if ent.st == nil {
			d := e.sessWU
			e.sessWU, e.sessWUQ = 0, false
			if d == 0 {
				return dst
			}
			b, _ := frame.AppendWindowUpdate(dst, 0, d)
			return b
		}
		st := ent.st
		d := st.wuPending
		st.wuPending, st.wuQueued = 0, false
		if d == 0 || st.removed || st.finRecv || st.resetErr != nil {
			return dst
		}
		b, _ := frame.AppendWindowUpdate(dst, st.id, d)
		return b
	case frame.TypeMaxStreams:
		e.maxStrDirty = false
		b, _ := frame.AppendMaxStreams(dst, e.granted)
		return b
	}
	return dst
}

// batchLen is the size of the batch laid out in dst so far, spliced bytes
// included.
func (e *Engine) batchLen(dst []byte) int {
	if e.splice != nil {
		return len(dst) + e.splice.n
	}
	return len(dst)
}

// appendData lays out DATA frames until the batch, the session credit or
// the ready streams run out.
func (e *Engine) appendData(dst []byte, limit, frames int, now time.Duration) ([]byte, int) {
	for {
		room := limit - e.batchLen(dst) - frame.HeaderSize
		if room <= 0 {
			break
		}
		cls := -1
		switch {
		case e.lists[0].head != nil && (e.lists[1].head == nil || e.iaRun < agingInteractive):
			cls = 0
			e.iaRun++
		case e.lists[1].head != nil:
			cls = 1
			e.iaRun = 0
		}
		if cls < 0 {
			break
		}
		st := e.lists[cls].head
		q := st.txq.Len()
		sc := e.sessSend.avail()
		if q > 0 && sc == 0 {
			// No session credit: only bare FINs can move.
			dst, frames = e.appendBareFins(dst, limit, frames)
			break
		}
		e.popFront(cls)
		if !st.sendable() {
			if st.flushing { // a reset waiting for data that cannot go
				e.finishFlush(st)
			}
			continue // relinked by a WINDOW_UPDATE
		}
		n := min(q, st.tx.avail(), e.peerMaxData, room, sc)
		if n < q && n == room && room < 1<<10 {
			e.link(st)
			break // leave a tiny remainder of the batch unused
		}
		if e.splice != nil {
			// A frame that ends where its chunk does lets the chunk go
			// out spliced, and realigns frames with chunks after a
			// short one.
			if r := st.txq.frontRun(); r < n && r >= minSplice {
				n = r
			}
		}
		fin := st.finQueued && !st.flushing && n == q
		dst, _ = frame.AppendDataHeader(dst, st.id, fin, n)
		if e.splice != nil {
			dst = st.txq.spliceTo(dst, n, e.splice)
		} else {
			dst = st.txq.appendTo(dst, n)
		}
		frames++
		st.tx.Consume(n)
		e.sessSend.Consume(n)
		e.txQueued -= n
		st.bytes += int64(n)
		if n > 0 {
			e.lastActivity = now
		}
		switch {
		case fin:
			st.finSent = true
			e.maybeFinish(st)
		case st.flushing && st.txq.Len() == 0:
			e.finishFlush(st)
		default:
			e.link(st)
		}
		e.roomCame(st)
	}
	if !e.sessWait.empty() {
		// Once per batch, not per frame: the writers woken find the
		// room of the whole batch, instead of one frame's each.
		e.wakeSessionWaiters()
	}
	return dst, frames
}

// appendBareFins sends the FINs of streams that have nothing else queued,
// which need no credit.
func (e *Engine) appendBareFins(dst []byte, limit, frames int) ([]byte, int) {
	for cls := range e.lists {
		for st := e.lists[cls].head; st != nil; {
			next := st.next
			if st.txq.Len() == 0 && st.finQueued && !st.flushing && e.batchLen(dst)+frame.HeaderSize <= limit {
				e.unlink(st)
				dst, _ = frame.AppendDataHeader(dst, st.id, true, 0)
				frames++
				st.finSent = true
				e.maybeFinish(st)
			}
			st = next
		}
	}
	return dst, frames
}

// spliceTo is appendTo for a writer that splices (see splice): a run that
// drains its chunk and is at least minSplice long is not copied but handed
// to sp whole, chunk and all, as a segment at dst's current length; shorter
// runs, and runs of a chunk that stays queued, are copied into dst.
func (q *chunkQueue) spliceTo(dst []byte, n int, sp *splice) []byte {
	q.n -= n
	for n > 0 {
		cp := q.at(0)
		c := *cp
		k := min(n, len(c)-q.off)
		n -= k
		if q.off+k == len(c) && k >= minSplice {
			sp.segs = append(sp.segs, pool.Segment{At: len(dst), Data: c[q.off:]})
			sp.chunks = append(sp.chunks, cp)
			sp.n += k
			q.ring[q.head] = nil // now sp's: popFront must not pool it
			q.popFront()
			continue
		}
		dst = append(dst, c[q.off:q.off+k]...)
		q.off += k
		if q.off == len(c) {
			q.popFront()
		}
	}
	return dst
}

// minSplice is the shortest run a splicing writer sends from its chunk
// instead of copying it: below it, an extra iovec costs more than the copy.
const minSplice = 2 << 10

// splice is what a batch took from send queues without copying: segments
// of chunks that left their queues, written after the batch buffer's bytes
// they follow (the driver), then pooled again. Used
// when the connection writes vectors in one system call (Config.Splice):
// it takes the writer's copy of every DATA byte out of the write path.
type splice struct {
	segs   []pool.Segment
	chunks []*[]byte
	n      int // bytes in segs: they count against the batch's size
}

// release gives the chunks back once the batch is written (or failed).
func (sp *splice) release() {
	for i, c := range sp.chunks {
		pool.PutChunk(c)
		sp.chunks[i] = nil
	}
	sp.chunks = sp.chunks[:0]
	clear(sp.segs)
	sp.segs = sp.segs[:0]
	sp.n = 0
}

// flatten returns the batch b with the segments copied in: the message
// the peer receives (for tests and for a write that cannot splice).
func (sp *splice) flatten(b []byte) []byte {
	out := make([]byte, 0, len(b)+len(sp.segs)*pool.ChunkSize)
	prev := 0
	for _, sg := range sp.segs {
		out = append(out, b[prev:sg.At]...)
		out = append(out, sg.Data...)
		prev = sg.At
	}
	return append(out, b[prev:]...)
}
