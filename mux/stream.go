package mux

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/engine"
)

// Stream is one bidirectional byte stream of a Session. It implements
// net.Conn: Read and Write may be called from different goroutines at once,
// deadlines really unblock waiting calls, and Close is a half-close (the
// peer reads EOF and may still write back). All methods are safe for
// concurrent use.
type Stream struct {
	// rec is the engine's record of the stream: its protocol state,
	// windows and buffers (sess.mu). It lives inside the Stream (one
	// allocation per stream) and rec.Owner() points back here (streamOf).
	rec  engine.Stream
	sess *Session

	// Wake-up channels, made only when a goroutine is about to wait on
	// them (sess.mu held), so an idle stream holds none: the engine's
	// events for a channel nobody made are no-ops (notify on nil), and the
	// waiter re-checks the state under sess.mu before it waits.
	ackCh      chan struct{} // closed at EvAnswered (made on demand: ackChan)
	rdCh, wrCh chan struct{}
	lentCh     chan struct{}             // the Read whose buffer is lent waits here too
	dl         atomic.Pointer[deadlines] // made by the first Set*Deadline
	wmu        sync.Mutex                // one Write at a time: writes never interleave
}

// deadlines are a stream's read and write deadlines.
type deadlines struct{ rd, wr deadline }

// deadlines returns st's deadlines, made on first use.
func (st *Stream) deadlines() *deadlines {
	if d := st.dl.Load(); d != nil {
		return d
	}
	st.dl.CompareAndSwap(nil, new(deadlines))
	return st.dl.Load()
}

// readDeadline returns a channel closed once the read deadline passed
// (nil: none set).
func (st *Stream) readDeadline() chan struct{} {
	if d := st.dl.Load(); d != nil {
		return d.rd.wait()
	}
	return nil
}

// writeDeadline is readDeadline for writes.
func (st *Stream) writeDeadline() chan struct{} {
	if d := st.dl.Load(); d != nil {
		return d.wr.wait()
	}
	return nil
}

// writeDeadlineSet reports whether a write deadline is set (pending or
// passed).
func (st *Stream) writeDeadlineSet() bool {
	d := st.dl.Load()
	return d != nil && d.wr.active()
}

// readDeadlineSet reports whether a read deadline is set (pending or
// passed).
func (st *Stream) readDeadlineSet() bool {
	d := st.dl.Load()
	return d != nil && d.rd.active()
}

// streamOf returns the Stream that holds rec, the engine's record of it:
// every engine.Stream of a session is the rec field of a Stream
// (Session.newStream), which its Owner points back to.
func streamOf(rec *engine.Stream) *Stream { return rec.Owner().(*Stream) }

// signalRead wakes a Read waiting on st (sess.mu held): one of those on
// rdCh, and the one whose buffer is lent, on lentCh, since data may be in
// it. A leader's Read waits on the socket instead (driver.readable).
func (st *Stream) signalRead() {
	notify(st.rdCh)
	notify(st.lentCh)
	st.sess.drv.readable(st)
}

// ackChan returns the channel closed at EvAnswered (sess.mu held).
func (st *Stream) ackChan() chan struct{} {
	if st.ackCh == nil {
		if st.rec.Answered() {
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
func (st *Stream) ID() uint32 { return st.rec.ID() }

// Session returns the session the stream belongs to.
func (st *Stream) Session() *Session { return st.sess }

// Headers returns the peer's headers: those of its open for a stream it
// opened, those of its acceptance for a stream we opened (empty until the
// ACK arrives). The caller must not modify the map.
func (st *Stream) Headers() http.Header {
	st.sess.mu.Lock()
	defer st.sess.unlock()
	h := st.rec.Headers()
	if h == nil {
		return http.Header{}
	}
	return h
}

// Accepted returns a channel closed once the stream's acceptance (its
// HEADERS ACK) was written to the connection, for streams the peer opened;
// for streams we opened it is closed when the peer answered. It is also
// closed when the session ends.
func (st *Stream) Accepted() <-chan struct{} {
	st.sess.mu.Lock()
	defer st.sess.unlock()
	return st.ackChan()
}

// SetInteractive marks the stream as interactive (exec stdin, terminal
// resize, error streams): its data is sent before bulk streams' data, with
// an aging rule so bulk streams still progress. Streams with less than
// 1 KiB pending are treated as interactive anyway.
func (st *Stream) SetInteractive(on bool) {
	st.sess.mu.Lock()
	st.sess.e.SetInteractive(&st.rec, on)
	st.sess.unlock()
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
	e := s.e
	s.mu.Lock()
	lead := false // this Read holds the socket (driver_fastpaths_lead.go)
	for {
		if isClosed(st.readDeadline()) {
			return st.readDone(lead, 0, ErrTimeout)
		}
		n, wait, err := e.Read(&st.rec, p, s.now())
		if !wait {
			return st.readDone(lead, n, err)
		}
		if st.rdCh == nil {
			st.rdCh = make(chan struct{}, 1)
		}
		// When no other Read waits with its buffer, DATA arriving now is
		// copied into p rather than into the receive buffer; whatever
		// arrived is returned even when the wait ended for another reason.
		lent := e.Lend(&st.rec, p)
		if lent {
			var again bool
			if lead, again = s.drv.leadWait(st, lead); again {
				if n := e.Unlend(&st.rec, s.now()); n > 0 {
					return st.readDone(lead, n, nil)
				}
				continue
			}
		}
		if !lead {
			s.drv.reclaim() // someone must read the socket while this Read waits
		}
		rd, mine := st.rdCh, (chan struct{})(nil)
		if lent {
			if st.lentCh == nil {
				st.lentCh = make(chan struct{}, 1)
			}
			mine = st.lentCh
		}
		s.unlock()
		select {
		case <-rd:
		case <-mine:
		case <-st.readDeadline():
		case <-s.deadCh:
		}
		s.mu.Lock()
		if lent {
			if s.drv.leadWoke(st) {
				lead = true
			}
			if n := e.Unlend(&st.rec, s.now()); n > 0 {
				return st.readDone(lead, n, nil)
			}
		}
	}
}

// readDone ends a Read (s.mu held; it releases it): a leader passes the
// token on (driver_fastpaths_lead.go), keeping it free for its next Read when it returns
// data and nothing more is buffered for it.
func (st *Stream) readDone(lead bool, n int, err error) (int, error) {
	s := st.sess
	if err != nil {
		notify(st.rdCh) // concurrent Reads: the next one sees the error too
	}
	if lead {
		s.drv.endLead(st, n > 0 && err == nil && st.rec.Buffered() == 0)
	}
	s.unlock()
	return n, err
}

// Write queues p for sending; concurrent Writes do not interleave. It
// copies as much as the stream's credit, its send buffer and the session's
// send buffer allow and blocks for the rest, honouring the write deadline,
// resets and the session's end. It returns n < len(p) only with an error;
// n is then exactly what was queued and will be sent.
func (st *Stream) Write(p []byte) (int, error) {
	st.wmu.Lock()
	defer st.wmu.Unlock()
	s := st.sess
	e := s.e
	n := 0
	kick := false // bytes were queued and the writer must learn of them
	s.mu.Lock()
	for {
		if err := e.WriteErr(&st.rec); err != nil {
			if kick {
				s.drv.wake()
			}
			s.unlock()
			return n, err
		}
		if n == len(p) {
			if kick {
				s.drv.kick(st, n) // releases s.mu
			} else {
				s.unlock()
			}
			return n, nil
		}
		if isClosed(st.writeDeadline()) {
			if kick {
				s.drv.wake()
			}
			s.unlock()
			return n, ErrTimeout
		}
		k, queued, _ := e.Write(&st.rec, p[n:])
		n += k
		kick = kick || queued
		if k > 0 {
			continue
		}
		if kick {
			s.drv.wake()
			kick = false
		}
		if st.wrCh == nil {
			st.wrCh = make(chan struct{}, 1)
		}
		// Waiting for the session's send buffer, the rest of p is queued
		// by the engine as room frees, in turn, with one wake-up.
		lent := e.LendWrite(&st.rec, p[n:])
		s.drv.reclaim() // credit comes from the socket
		wr := st.wrCh
		s.unlock()
		select {
		case <-wr:
		case <-st.writeDeadline():
		case <-s.deadCh:
		}
		s.mu.Lock()
		if lent {
			n = len(p) - e.UnlendWrite(&st.rec)
		}
		e.StopWaiting(&st.rec)
	}
}

// CloseWrite ends our direction of the stream: a FIN follows the queued
// bytes, and the peer reads EOF after them. The stream still reads.
func (st *Stream) CloseWrite() error {
	s := st.sess
	s.mu.Lock()
	s.e.CloseWrite(&st.rec)
	s.drv.reclaim() // the application is done writing: the peer's answer may follow
	s.unlock()
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
	s.e.CloseRead(&st.rec, s.now())
	s.drv.reclaim()
	s.unlock()
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
	s.e.Reset(&st.rec, code, s.now())
	s.drv.reclaim()
	s.unlock()
	return nil
}

// SetDeadline sets the read and write deadlines.
func (st *Stream) SetDeadline(t time.Time) error {
	d := st.deadlines()
	d.rd.set(t)
	d.wr.set(t)
	st.sess.mu.Lock()
	st.signalRead() // waiters re-read the deadline channel
	notify(st.wrCh)
	st.sess.unlock()
	return nil
}

// SetReadDeadline sets the deadline of pending and future Reads; a zero t
// clears it. Expired Reads return ErrTimeout.
func (st *Stream) SetReadDeadline(t time.Time) error {
	st.deadlines().rd.set(t)
	st.sess.mu.Lock()
	st.signalRead()
	st.sess.unlock()
	return nil
}

// SetWriteDeadline sets the deadline of pending and future Writes; a zero
// t clears it. An expired Write returns the bytes queued so far and
// ErrTimeout.
func (st *Stream) SetWriteDeadline(t time.Time) error {
	st.deadlines().wr.set(t)
	st.sess.mu.Lock()
	notify(st.wrCh)
	st.sess.unlock()
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
