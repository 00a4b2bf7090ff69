package mux

import (
	"bufio"
	"net"
	"time"

	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// fastDriver is DriverFastPaths: the goroutine driver with two strategies
// on top, behind the same seam and under the same locks: a Write that
// finds the writer goroutine parked writes its own batch (kick, here),
// and a Read that waits reads the socket itself (leader reads,
// driver_fastpaths_lead.go). (The third fast path, DATA written from its
// send chunks, is the engine's Splice, which the event loop uses too.)
type fastDriver struct {
	goDriver

	// The read token and leader reads (driver_fastpaths_lead.go); s.mu.
	tok         int8
	leader      *Stream       // the Read of this stream holds the token
	leadWant    *Stream       // a Read of this stream waits and may lead
	peeking     bool          // the leader is in wsio.Conn.Wait
	interrupted bool          // interruptLeader set a read deadline in the past
	leadFailed  bool          // a leader's read failed: the reader reads next
	leadOK      bool          // the connection supports leader reads
	leadGen     uint32        // counts the times a Read took the token
	tickDue     time.Duration // session clock: when the reader goroutine's next check fires
	ticks       uint64        // checks the reader goroutine made (tests)
	tokCh       chan struct{}
	tokTimer    *time.Timer
}

// newFastDriver prepares the fast-paths driver of s over conn (br's
// buffered bytes are read first); start starts its goroutines.
func newFastDriver(s *Session, conn net.Conn, br *bufio.Reader) *fastDriver {
	d := &fastDriver{}
	d.s = s
	d.init(conn, br)
	d.leadOK = wsio.Interruptible(conn)
	d.tokCh = make(chan struct{}, 1)
	d.tokTimer = time.NewTimer(time.Hour)
	d.tokTimer.Stop()
	d.beforeRead = d.handOffIdle
	return d
}

func (d *fastDriver) start() {
	go d.writeLoop()
	go d.readLoop()
}

// attach is goDriver's, and leader reads follow what conn allows.
func (d *fastDriver) attach(conn net.Conn, br *bufio.Reader) {
	d.goDriver.attach(conn, br)
	d.leadOK = wsio.Interruptible(conn)
}

// directWriteMax is the largest Write that sends its own batch whatever
// else is queued. A larger one does so only when its stream is the only
// one with DATA to send and has no write deadline: one bulk stream then
// saves the two goroutine handoffs of waking the writer and waiting for it
// (docs/performance-history.md, "Direct writes"), its caller waiting on the
// socket as a yamux or x/net/http2 Write does, and a Write's goroutine
// never writes other streams' bulk. A deadline cannot bound a socket write under
// way (stopping inside a WebSocket message would break the connection),
// and a small write seldom finds the socket full.
const directWriteMax = 4 << 10

// kick gets queued bytes moving after a Write of n bytes on st (s.mu
// held; it releases it). When the writer goroutine is parked and nothing
// else is being written, the calling goroutine may lay out and write the
// batch itself (see directWriteMax); otherwise it wakes the writer.
func (d *fastDriver) kick(st *Stream, n int) {
	s := d.s
	direct := n <= directWriteMax || s.e.SoleSender(&st.rec) && !st.writeDeadlineSet()
	if !direct || !d.takeWriter() {
		d.wake()
		s.unlock()
		return
	}
	bp := pool.GetBatch(wsio.HeaderRoom + s.cfg.MaxBatch)
	bt := &s.batch
	bt.Direct = true
	s.e.NextBatch(bt, (*bp)[:wsio.HeaderRoom], s.now())
	bt.Direct = false
	d.writeOwnBatch(bp, bt.Frames)
}

// takeWriter reports whether the calling goroutine may lay out and write a
// batch itself, and then holds sendMu (s.mu held): the writer goroutine
// is parked, the session may send DATA and no
// WebSocket control frame waits for the writer.
func (d *fastDriver) takeWriter() bool {
	s := d.s
	if !d.writerParked.Load() || !s.e.Ready() || d.wsc.ControlPending() || !s.sendMu.TryLock() {
		return false
	}
	if d.directErr != nil || !d.writerParked.Load() {
		s.sendMu.Unlock()
		return false
	}
	return true
}

// writeOwnBatch writes the batch b (in bp) the calling goroutine laid out
// after takeWriter (s.mu and sendMu held; it releases both), then wakes
// the writer goroutine for what did not fit, for a stall that began (its
// timer; other timers only move later) and for a failed write.
func (d *fastDriver) writeOwnBatch(bp *[]byte, b []byte) {
	s := d.s
	more := s.batch.More
	s.unlock()
	if len(b) > wsio.HeaderRoom {
		if err := d.writeBatch(b, false, 0); err != nil {
			d.directErr = err
			more = true
		}
	}
	*bp = b[:0]
	pool.PutBatch(bp)
	s.sendMu.Unlock()
	if more {
		d.wake()
	}
}
