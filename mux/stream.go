package mux

import (
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/frame"
)

// Stream is one bidirectional byte stream of a Session. It implements
// net.Conn: Read and Write may be called from different goroutines at once,
// deadlines really unblock waiting calls, and Close is a half-close (the
// peer reads EOF and may still write back). All methods are safe for
// concurrent use.
type Stream struct {
	sess      *Session
	id        uint32
	wuPending uint32        // stream WINDOW_UPDATE credit not yet laid out (sess.mu)
	created   time.Duration // session clock

	// Guarded by sess.mu.
	hdrs  http.Header
	bytes int64 // payload exchanged both ways (rapid-reset accounting)

	rx    flow.Receiver
	rxq   chunkQueue
	rdBuf []byte // a waiting Read's buffer: DATA is copied to rdBuf[len:cap], len counts it

	tx       sendCredit
	txq      chunkQueue
	writeErr *StreamError // STOP_SENDING from the peer
	resetErr *StreamError // reset either way: both directions ended

	ackCh  chan struct{} // local: answer or death; peer: ACK written (made on demand: ackChan)
	next   *Stream
	inList int8

	// Flags, packed together (an idle stream's size matters: IdleStreams).
	local       bool // opened by us
	interactive bool
	finRecv     bool
	readClosed  bool
	sessWaiting bool // a Write waits in core.sessWait
	finQueued   bool
	finSent     bool
	flushing    bool // reset locally; RST_STREAM (resetErr's code and reason) follows the queued bytes
	acked       bool // local: the peer's ACK arrived (or DATA did)
	ackImplied  bool // acked by DATA; the ACK itself may follow
	ackClosed   bool
	handled     bool // peer stream: accepted or its handler returned
	removed     bool // out of the session table
	wuQueued    bool

	rdCh, wrCh chan struct{} // made by the first Read / Write that waits
	rdDL, wrDL deadline
	wmu        sync.Mutex // one Write at a time: writes never interleave
}

// The wake-up channels rdCh, wrCh and ackCh are made only when a goroutine
// is about to wait on them (sess.mu held), so an idle stream holds none:
// signalling a channel nobody made yet is a no-op (notify on nil), and the
// waiter re-checks the state under sess.mu before it waits. These are all
// called with sess.mu held.
func (st *Stream) signalRead() {
	notify(st.rdCh)
	if s := st.sess; s != nil && s.leader == st {
		s.interruptLeader() // its Read waits on the socket, not on rdCh
	}
}
func (st *Stream) signalWrite() { notify(st.wrCh) }
func (st *Stream) wakeAll() {
	st.signalRead()
	notify(st.wrCh)
}

func (st *Stream) closeAck() {
	if !st.ackClosed {
		st.ackClosed = true
		if st.ackCh != nil {
			close(st.ackCh)
		}
	}
}

// ackChan returns the channel closeAck closes (sess.mu held).
func (st *Stream) ackChan() chan struct{} {
	if st.ackCh == nil {
		if st.ackClosed {
			return closedChan
		}
		st.ackCh = make(chan struct{})
	}
	return st.ackCh
}

// closedChan is a closed channel, for waits that are already over.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// ID returns the stream id: odd for streams the client opened, even for the
// server's.
func (st *Stream) ID() uint32 { return st.id }

// Session returns the session the stream belongs to.
func (st *Stream) Session() *Session { return st.sess }

// Headers returns the peer's headers: those of its open for a stream it
// opened, those of its acceptance for a stream we opened (empty until the
// ACK arrives). The caller must not modify the map.
func (st *Stream) Headers() http.Header {
	st.sess.mu.Lock()
	defer st.sess.mu.Unlock()
	if st.hdrs == nil {
		return http.Header{}
	}
	return st.hdrs
}

// Accepted returns a channel closed once the stream's acceptance (its
// HEADERS ACK) was written to the connection, for streams the peer opened;
// for streams we opened it is closed when the peer answered. It is also
// closed when the session ends.
func (st *Stream) Accepted() <-chan struct{} {
	st.sess.mu.Lock()
	defer st.sess.mu.Unlock()
	return st.ackChan()
}

// SetInteractive marks the stream as interactive (exec stdin, terminal
// resize, error streams): its data is sent before bulk streams' data, with
// an aging rule so bulk streams still progress. Streams with less than
// 1 KiB pending are treated as interactive anyway.
func (st *Stream) SetInteractive(on bool) {
	st.sess.mu.Lock()
	st.interactive = on
	st.sess.mu.Unlock()
}

// LocalAddr returns the session's local address.
func (st *Stream) LocalAddr() net.Addr { return st.sess.LocalAddr() }

// RemoteAddr returns the session's remote address.
func (st *Stream) RemoteAddr() net.Addr { return st.sess.RemoteAddr() }

// Read reads received bytes. Data the peer sent before it ended the stream
// (FIN, reset) or the session is delivered first; then Read returns io.EOF
// after a FIN or a graceful session end, a *StreamError after a reset, or
// the session's error. Reading returns flow-control credit to the peer.
func (st *Stream) Read(p []byte) (int, error) {
	s := st.sess
	s.mu.Lock()
	direct := false // this Read registered p for direct delivery (rdBuf)
	lead := false   // this Read holds the socket (lead.go)
	for {
		if direct {
			// Whatever arrived went straight into p (one copy fewer);
			// it is returned even when the wait ended for another reason.
			direct = false
			n := len(st.rdBuf)
			st.rdBuf = nil
			if s.leadWant == st {
				s.leadWant = nil
			}
			if s.tok == tokLeader && s.leader == st {
				lead = true // taken, or handed over by the reader goroutine
			}
			if n > 0 {
				s.c.consumed(st, n, s.now())
				return st.readDone(lead, n, nil)
			}
		}
		if isClosed(st.rdDL.wait()) {
			return st.readDone(lead, 0, ErrTimeout)
		}
		if st.rxq.Len() > 0 {
			if len(p) == 0 {
				return st.readDone(lead, 0, nil)
			}
			n := st.rxq.read(p)
			s.c.consumed(st, n, s.now())
			if st.rxq.Len() > 0 {
				st.signalRead() // another reader may take the rest
			}
			return st.readDone(lead, n, nil)
		}
		if err := st.readErr(); err != nil {
			return st.readDone(lead, 0, err)
		}
		if len(p) == 0 {
			return st.readDone(lead, 0, nil)
		}
		if st.rdCh == nil {
			st.rdCh = make(chan struct{}, 1)
		}
		if st.rdBuf == nil {
			// No other Read waits with its buffer: DATA arriving now
			// is copied into p rather than into the receive buffer.
			st.rdBuf, direct = p[:0], true
		}
		if direct {
			switch {
			case (lead || s.takeLead(st)) && s.canLead(st):
				// Read the socket here rather than wait for the reader
				// goroutine to hand the data over.
				lead = true
				if err := s.leadOnce(); err != nil {
					s.giveBack(st, true)
					lead = false
				}
				continue
			case lead || s.tok == tokLeader && s.leader == st:
				s.giveBack(st, false) // a deadline was set, or the session ends
				lead = false
			case s.leadWant == nil && s.canLead(st):
				s.leadWant = st
			}
		}
		if !lead {
			s.reclaim() // someone must read the socket while this Read waits
		}
		rd := st.rdCh
		s.mu.Unlock()
		select {
		case <-rd:
		case <-st.rdDL.wait():
		case <-s.c.deadCh:
		}
		s.mu.Lock()
	}
}

// readDone ends a Read (s.mu held; it releases it): a leader passes the
// token on (lead.go), keeping it free for its next Read when it returns
// data and nothing more is buffered for it.
func (st *Stream) readDone(lead bool, n int, err error) (int, error) {
	s := st.sess
	if lead {
		s.endLead(st, n > 0 && err == nil && st.rxq.Len() == 0)
	}
	s.mu.Unlock()
	return n, err
}

// dropDirect discards the bytes already copied into a waiting Read's
// buffer (the Read then returns none of them) and returns their count, for
// the caller to credit back with the receive buffer's (sess.mu held).
func (st *Stream) dropDirect() int {
	n := len(st.rdBuf)
	if st.rdBuf != nil {
		st.rdBuf = st.rdBuf[:0:0] // still lent (the Read clears it), takes nothing more
	}
	return n
}

// readErr is the error Read returns once the buffer is empty.
func (st *Stream) readErr() error {
	c := st.sess.c
	switch {
	case st.finRecv:
		return io.EOF
	case st.resetErr != nil:
		return st.resetErr
	case st.readClosed:
		return ErrStreamClosed
	case c.err != nil:
		if graceful(c.err) {
			return io.EOF
		}
		return c.err
	}
	return nil
}

// writeErr is the error Write returns, or nil.
func (st *Stream) writeErrLocked() error {
	c := st.sess.c
	switch {
	case st.resetErr != nil:
		return st.resetErr
	case st.writeErr != nil:
		return st.writeErr
	case st.finQueued:
		return ErrStreamClosed
	case c.err != nil:
		return c.err
	}
	return nil
}

// Write queues p for sending; concurrent Writes do not interleave. It copies as much as the stream's credit, its
// send buffer and the session's send buffer allow and blocks for the rest,
// honouring the write deadline, resets and the session's end. It returns
// n < len(p) only with an error; n is then exactly what was queued and
// will be sent.
func (st *Stream) Write(p []byte) (int, error) {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	s := st.sess
	c := s.c
	n := 0
	kick := false // bytes were queued and the writer must learn of them
	s.mu.Lock()
	for {
		if err := st.writeErrLocked(); err != nil {
			if kick {
				c.wake()
			}
			s.mu.Unlock()
			return n, err
		}
		if n == len(p) {
			if kick {
				s.kick(n) // releases s.mu
			} else {
				s.mu.Unlock()
			}
			return n, nil
		}
		if isClosed(st.wrDL.wait()) {
			if kick {
				c.wake()
			}
			s.mu.Unlock()
			return n, ErrTimeout
		}
		q := st.txq.Len()
		room := min(st.tx.avail()-q, s.cfg.StreamSendBuffer-q, s.cfg.SessionSendBuffer-c.txQueued)
		if room > 0 {
			k := min(room, len(p)-n)
			st.txq.write(p[n : n+k])
			c.txQueued += k
			n += k
			if st.inList == 0 {
				c.link(st)
				kick = true
			}
			continue
		}
		if kick {
			c.wake()
			kick = false
		}
		if s.cfg.SessionSendBuffer-c.txQueued <= 0 && !st.sessWaiting {
			st.sessWaiting = true
			c.sessWait.push(st)
		}
		if st.wrCh == nil {
			st.wrCh = make(chan struct{}, 1)
		}
		s.reclaim() // credit comes from the socket
		wr := st.wrCh
		s.mu.Unlock()
		select {
		case <-wr:
		case <-st.wrDL.wait():
		case <-c.deadCh:
		}
		s.mu.Lock()
		st.sessWaiting = false
	}
}

// CloseWrite ends our direction of the stream: a FIN follows the queued
// bytes, and the peer reads EOF after them. The stream still reads.
func (st *Stream) CloseWrite() error {
	s := st.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.finQueued || st.resetErr != nil || s.c.err != nil {
		return nil
	}
	st.finQueued = true
	s.c.link(st)
	s.c.wake()
	st.signalWrite()
	s.reclaim() // the application is done writing: the peer's answer may follow
	return nil
}

// Close is CloseWrite: a half-close, as with SPDY streams. Use Reset to
// abort both directions.
func (st *Stream) Close() error { return st.CloseWrite() }

// CloseRead ends our receive direction: STOP_SENDING asks the peer to stop,
// buffered bytes are discarded and credited back, and Read returns
// ErrStreamClosed.
func (st *Stream) CloseRead() error {
	s := st.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.c
	if st.readClosed || st.finRecv || st.resetErr != nil || c.err != nil {
		return nil
	}
	st.readClosed = true
	if n := st.rxq.Len() + st.dropDirect(); n > 0 {
		st.rxq.reset()
		c.consumed(st, n, s.now())
	}
	c.urgent.push(ctrl{typ: frame.TypeStopSending, id: st.id, arg: uint32(frame.Cancel)})
	c.wake()
	st.signalRead()
	s.reclaim()
	return nil
}

// Reset aborts both directions with code (RST_STREAM). Received bytes not
// yet read are dropped (and credited back); bytes earlier Writes queued are
// still sent before the RST_STREAM, as far as the peer's window allows, so
// the peer's Read returns everything written before the reset and then a
// *StreamError with the code (its Write fails with it at once). Here Read
// and Write fail with a *StreamError with Remote false.
func (st *Stream) Reset(code frame.ErrorCode) error {
	s := st.sess
	s.mu.Lock()
	defer s.mu.Unlock()
	if st.removed && st.resetErr == nil {
		return nil // ended cleanly both ways already
	}
	s.c.resetStream(st, code, "", s.now(), true)
	s.reclaim()
	return nil
}

// SetDeadline sets the read and write deadlines.
func (st *Stream) SetDeadline(t time.Time) error {
	st.rdDL.set(t)
	st.wrDL.set(t)
	st.sess.mu.Lock()
	st.wakeAll() // waiters re-read the deadline channel
	st.sess.mu.Unlock()
	return nil
}

// SetReadDeadline sets the deadline of pending and future Reads; a zero t
// clears it. Expired Reads return ErrTimeout.
func (st *Stream) SetReadDeadline(t time.Time) error {
	st.rdDL.set(t)
	st.sess.mu.Lock()
	st.signalRead()
	st.sess.mu.Unlock()
	return nil
}

// SetWriteDeadline sets the deadline of pending and future Writes; a zero
// t clears it. An expired Write returns the bytes queued so far and
// ErrTimeout.
func (st *Stream) SetWriteDeadline(t time.Time) error {
	st.wrDL.set(t)
	st.sess.mu.Lock()
	st.signalWrite()
	st.sess.mu.Unlock()
	return nil
}

// deadline is a settable deadline whose channel closes when it passes (the
// net.Pipe technique). The zero value has no deadline and no channel.
type deadline struct {
	mu     sync.Mutex
	timer  *time.Timer
	cancel chan struct{} // nil: never set
}

func (d *deadline) set(t time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil && !d.timer.Stop() {
		<-d.cancel // the callback is closing it
	}
	d.timer = nil
	if d.cancel == nil {
		if t.IsZero() {
			return
		}
		d.cancel = make(chan struct{})
	}
	closed := isClosed(d.cancel)
	if t.IsZero() {
		if closed {
			d.cancel = make(chan struct{})
		}
		return
	}
	if dur := time.Until(t); dur > 0 {
		if closed {
			d.cancel = make(chan struct{})
		}
		ch := d.cancel
		d.timer = time.AfterFunc(dur, func() { close(ch) })
		return
	}
	if !closed {
		close(d.cancel)
	}
}

// active reports whether a deadline is set (pending or passed).
func (d *deadline) active() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.timer != nil || isClosed(d.cancel)
}

// wait returns a channel closed when the deadline passes (nil: never).
func (d *deadline) wait() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.cancel
}

func isClosed(ch chan struct{}) bool {
	if ch == nil {
		return false
	}
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

var _ net.Conn = (*Stream)(nil)
