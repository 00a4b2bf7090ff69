package mux

import (
	"errors"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/netpoll"
	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
	"github.com/wsmux/wsmux/mux/internal/wsnb"
)

// The event loop's write side: batches laid out and written until the
// socket is full, half-written ones parked in evConn, control frames and
// the closing handshake.

// write writes what is pending, then batches, until the socket is full,
// nothing is left or the budget ran out.
func (c *evConn) write() uint32 {
	s, e := c.s, c.s.e
	for batches := 0; ; {
		if c.out != nil || c.vec != nil {
			if !c.flush() {
				return 0 // parked until the socket takes more, or failed
			}
		}
		if c.finished {
			return 0
		}
		if c.closeReply || c.pongDue && !c.closeSent {
			c.queueControl()
			continue
		}
		if c.closeSent && !c.lingering {
			// We answered the peer's close: nothing more may be sent.
			c.finish()
			return 0
		}
		if c.lingering {
			if c.readDone {
				c.finish()
			}
			return 0
		}
		if batches == evWriteBudget {
			return evWake
		}
		bp := pool.GetBatch(wsio.HeaderRoom + s.cfg.MaxBatch)
		b := (*bp)[:wsio.HeaderRoom]
		s.mu.Lock()
		now := s.now()
		bt := &s.batch
		bt.Preface, bt.Direct = !c.started, false
		c.started = true
		bt.Partial, bt.PartialSince = c.wasPartial, c.partialSince
		e.NextBatch(bt, b, now)
		if bt.ConnLost {
			if s.lost(now, bt.LostErr) {
				s.unlock()
				*bp = bt.Frames[:0]
				pool.PutBatch(bp)
				c.detach()
				return 0
			}
			e.FailConnLost()
			e.NextBatch(bt, bt.Frames, now)
		}
		b = bt.Frames
		finished := bt.Finished
		s.unlock()
		if len(b) == wsio.HeaderRoom {
			*bp = b[:0]
			pool.PutBatch(bp)
			if finished {
				c.startClose()
				continue
			}
			return 0
		}
		c.outBuf, c.outBatch, c.outLen = bp, true, len(b)-wsio.HeaderRoom
		if segs, n := bt.Segs, bt.SplicedLen; len(segs) > 0 {
			c.vec = evVecs.Get().(*evVec)
			c.vec.all = wsnb.FrameVec(c.vec.all[:0], b, segs, c.client)
			c.vec.v = c.vec.all
			c.outLen += n
		} else {
			start := wsnb.Frame(b, ws.OpBinary, c.client)
			c.out = b[start:]
		}
		batches++
	}
}

// flush writes what is left of c.out (or c.vec); it reports whether all
// of it went.
func (c *evConn) flush() bool {
	s := c.s
	var n int
	var err error
	if c.vec != nil {
		n, err = c.writeVec()
	} else {
		n, err = c.reg.Write(c.out)
		c.out = c.out[n:]
	}
	now := s.now()
	if n > 0 || !c.blocked {
		c.blockedSince = now
	}
	if err != nil {
		if errors.Is(err, netpoll.ErrWouldBlock) {
			c.blocked = true
			return false
		}
		c.writeError(frame.InternalError, err)
		return false
	}
	c.blocked = false
	if c.outBatch {
		s.stats.MessagesOut.Add(1)
		s.stats.BytesOut.Add(uint64(c.outLen))
		s.batchWritten()
	}
	c.releaseOut()
	c.putCtl()
	return true
}

// writeVec writes the pieces left in c.vec, as many as the socket takes,
// and drops those written.
func (c *evConn) writeVec() (int, error) {
	total := 0
	for v := c.vec.v; len(v) > 0; v = c.vec.v {
		n, err := c.reg.Writev(v)
		total += n
		for n > 0 {
			k := min(n, len(v[0]))
			v[0] = v[0][k:]
			n -= k
			if len(v[0]) == 0 {
				v = v[1:]
			}
		}
		c.vec.v = v
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

func (c *evConn) releaseOut() {
	if c.vec != nil {
		clear(c.vec.all)
		c.vec.all, c.vec.v = c.vec.all[:0], nil
		evVecs.Put(c.vec)
		c.vec = nil
		// The chunks go back to their pool (batchWritten did so already
		// after a write; a batch left behind keeps its ACKs untold, as
		// the next one replaces them).
		b := &c.s.batch
		b.DropAcks()
		c.s.e.BatchWritten(b)
	}
	if c.outBuf != nil {
		*c.outBuf = (*c.outBuf)[:0]
		pool.PutBatch(c.outBuf)
	}
	c.out, c.outBuf, c.outBatch = nil, nil, false
}

// writeError ends the session after a failed or stalled write.
func (c *evConn) writeError(code frame.ErrorCode, err error) {
	s := c.s
	if c.outBatch {
		s.batchWritten()
	}
	c.releaseOut()
	if c.suspendOn(err) {
		return
	}
	c.writeFailed = true
	s.mu.Lock()
	s.e.WriteFailed(code, err)
	s.unlock()
	c.finish()
}

// queueControl lays out the pong and the close reply that are due as
// c.out (in c.ctl).
func (c *evConn) queueControl() {
	cb := c.ctlBuf()
	out := cb.out[:0]
	if c.pongDue {
		buf := append(cb.scratch[:wsio.HeaderRoom], cb.pong[:c.pongLen]...)
		start := wsnb.Frame(buf, ws.OpPong, c.client)
		out = append(out, buf[start:]...)
		c.pongDue = false
	}
	if c.closeReply {
		c.closeReply = false
		c.closeSent = true
		buf := cb.scratch[:wsio.HeaderRoom]
		if c.closeEcho != 0 {
			buf = append(buf, byte(c.closeEcho>>8), byte(c.closeEcho))
		}
		start := wsnb.Frame(buf, ws.OpClose, c.client)
		out = append(out, buf[start:]...)
	}
	c.out = out
}

// startClose sends our WebSocket close (the engine's session ended and its
// last frames went out), then lingers for the peer's.
func (c *evConn) startClose() {
	s := c.s
	s.mu.Lock()
	code, reason := s.closeStatus()
	closeBy := s.e.CloseBy()
	now := s.now()
	s.lingering = true
	s.unlock()
	c.lingering = true
	c.lingerBy = now + min(closeLinger, s.cfg.CloseTimeout)
	if closeBy > 0 {
		c.lingerBy = min(c.lingerBy, closeBy)
	}
	if c.closeSent {
		return
	}
	c.closeSent = true
	cb := c.ctlBuf()
	buf := append(cb.scratch[:wsio.HeaderRoom], ws.NewCloseFrameBody(code, reason)...)
	start := wsnb.Frame(buf, ws.OpClose, c.client)
	c.out = append(cb.out[:0], buf[start:]...)
	c.blocked = false
}
