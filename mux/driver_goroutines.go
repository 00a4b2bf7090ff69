package mux

import (
	"bufio"
	"errors"
	"net"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux/internal/pool"
	"github.com/wsmux/wsmux/mux/internal/wsio"
)

// The goroutine driver: a reader goroutine feeds received messages to the
// engine, a writer goroutine writes its batches and runs its timers, and
// handler goroutines run Config.Handler (seam.go). The fast paths of
// DriverFastPaths (driver_fastpaths*.go) are strategies on top of it,
// behind the same seam (seam.go) and under the same locks.

// goDriver is the goroutine driver's state beside the engine.
type goDriver struct {
	noLead // the reader goroutine reads every message
	s      *Session
	wsc    *wsio.Conn

	// beforeRead, when set, runs before each read of the reader
	// goroutine (fastDriver's hand-off of the socket to a waiting Read).
	beforeRead func()

	rxStart      atomic.Int64  // 1 + session clock when the message being received started; 0: none
	wakeCh       chan struct{} // wakes the writer goroutine
	writerDone   chan struct{}
	writerParked atomic.Bool // the writer waits for work (set before it releases sendMu)
	wdl          time.Time   // write deadline in force (sendMu)
	directErr    error       // a direct write failed; the writer handles it (sendMu)
}

// newGoDriver prepares the goroutine driver of s over conn (br's buffered
// bytes are read first); start starts its goroutines.
func newGoDriver(s *Session, conn net.Conn, br *bufio.Reader) *goDriver {
	d := &goDriver{s: s}
	d.init(conn, br)
	return d
}

func (d *goDriver) init(conn net.Conn, br *bufio.Reader) {
	s := d.s
	d.wakeCh = make(chan struct{}, 1)
	d.writerDone = make(chan struct{})
	s.readerDone = make(chan struct{})
	d.wsc = wsio.New(conn, br, s.client, s.cfg.MaxMessageSize)
	d.wsc.SetNotify(d.wake)
	d.wsc.SetMessageHook(d.messageHook)
}

func (d *goDriver) start() {
	go d.writeLoop()
	go d.readLoop()
}

// wake tells the writer goroutine there may be something to write.
func (d *goDriver) wake() { notify(d.wakeCh) }

// kick wakes the writer goroutine (s.mu held; it releases it).
func (d *goDriver) kick(*Stream, int) {
	d.wake()
	d.s.unlock()
}

func (d *goDriver) suspended()  {} // the reader and writer see the connection fail
func (d *goDriver) connClosed() {} // the writer's write fails

// attach reads and writes conn from now on (s.mu and sendMu held). A
// direct write that failed on the lost connection left its error for the
// writer goroutine; if the writer had not taken it yet, it would suspend
// the session again on this connection.
func (d *goDriver) attach(conn net.Conn, br *bufio.Reader) {
	s := d.s
	d.directErr = nil
	d.wsc = wsio.New(conn, br, s.client, s.cfg.MaxMessageSize)
	d.wsc.SetNotify(d.wake)
	d.wsc.SetMessageHook(d.messageHook)
}

// resumed starts a reader goroutine on the new connection (the writer
// goroutine goes on).
func (d *goDriver) resumed() { go d.readLoop() }

// messageHook records when the message being received started (reader
// goroutine); the writer's timers bound how long it may stay partial.
func (d *goDriver) messageHook(started bool) {
	s := d.s
	if started {
		d.rxStart.Store(int64(s.now()) + 1)
	} else {
		d.rxStart.Store(0)
	}
}

// yieldMessage is the largest message after which the reader yields.
const yieldMessage = 4 << 10

// readLoop feeds every message to the core until the connection fails.
func (d *goDriver) readLoop() {
	s := d.s
	defer close(s.readerDone)
	for {
		if d.beforeRead != nil {
			d.beforeRead() // the fast paths' hand-off to a leader
		}
		msg, err := d.wsc.ReadMessage()
		s.mu.Lock()
		if err != nil {
			if !isPeerEnd(err) && s.lost(s.now(), err) {
				s.unlock() // suspended: the next connection gets a new reader
				return
			}
			s.readFailed(err)
			s.unlock()
			return
		}
		s.e.Feed(msg, s.now())
		s.unlock()
		if s.res != nil {
			s.confirmed()
		}
		if len(msg) <= yieldMessage {
			// A small message most likely woke a Read waiting for it:
			// let that goroutine run here now (it is next on this P),
			// before this one's next read, which usually finds the
			// socket empty and parks. That takes a system call off
			// the request/response path.
			runtime.Gosched()
		}
	}
}

// writeLoop writes the preface, then batches until the session ends; it
// also runs the timers. It closes the connection when done.
func (d *goDriver) writeLoop() {
	s := d.s
	defer close(d.writerDone)
	e := s.e
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	var zero [wsio.HeaderRoom]byte
	first := true
	writeFailed := false
	var bp *[]byte // batch buffer, held from batch to batch while busy
	s.sendMu.Lock()
	for {
		if err := d.directErr; err != nil {
			d.directErr = nil
			if d.writeError(err) {
				continue // suspended: a resume brings a new connection
			}
			writeFailed = true
			break
		}
		if d.wsc.ControlPending() && !s.Suspended() {
			// A pong or close reply goes out even when no batch was
			// written for long: the deadline of the last one has passed.
			if t := time.Now(); d.wdl.Sub(t) < s.cfg.WriteTimeout*3/4 {
				d.wdl = t.Add(s.cfg.WriteTimeout)
				_ = s.conn.SetWriteDeadline(d.wdl)
			}
		}
		if err := d.wsc.FlushControl(); err != nil {
			s.mu.Lock()
			if s.lost(s.now(), err) {
				s.unlock()
				continue
			}
			e.WriteFailed(frame.InternalError, err)
			s.unlock()
			writeFailed = true
			break
		}
		if bp == nil {
			bp = pool.GetBatch(wsio.HeaderRoom + s.cfg.MaxBatch)
		}
		b := append((*bp)[:0], zero[:]...)
		s.mu.Lock()
		now := s.now()
		bt := &s.batch
		bt.Preface, bt.Direct = first, false
		first = false
		if v := d.rxStart.Load(); v > 0 {
			bt.Partial, bt.PartialSince = true, time.Duration(v-1)
		} else {
			bt.Partial, bt.PartialSince = false, 0
		}
		e.NextBatch(bt, b, now)
		if bt.ConnLost {
			if !s.lost(now, bt.LostErr) { // resume.go
				e.FailConnLost()
			}
			e.NextBatch(bt, bt.Frames, now)
		}
		b = bt.Frames
		dead, finished := bt.Dead, bt.Finished
		wait, closeBy := bt.Wait, bt.CloseBy
		s.unlock()
		if len(b) > wsio.HeaderRoom {
			err := d.writeBatch(b, dead, closeBy)
			*bp = b[:0] // kept for the next batch while busy
			if err != nil {
				if d.writeError(err) {
					continue // suspended
				}
				writeFailed = true
				break
			}
			if finished {
				break
			}
			continue
		}
		// Going idle: the buffer goes back to the pool, so an idle session
		// holds none.
		*bp = b[:0]
		pool.PutBatch(bp)
		bp = nil
		if finished {
			break
		}
		if wait < 0 {
			wait = time.Hour
		}
		timer.Reset(wait)
		d.writerParked.Store(true)
		s.sendMu.Unlock()
		select {
		case <-d.wakeCh:
		case <-timer.C:
		}
		d.writerParked.Store(false)
		s.sendMu.Lock()
	}
	// sendMu stays held until the connection is closed: no direct write
	// may follow the close.
	d.finish(writeFailed)
}

// writeError ends the session after a failed write (writer goroutine,
// sendMu held), or suspends it (true) when it may resume.
func (d *goDriver) writeError(err error) bool {
	s := d.s
	if s.res != nil {
		s.mu.Lock()
		ok := s.lost(s.now(), err)
		s.unlock()
		if ok {
			return true
		}
	}
	if errors.Is(err, wsio.ErrCloseSent) {
		// The reader got the peer's close and FlushControl answered it:
		// the reader's account of the end wins.
		<-s.readerDone
	}
	code := frame.InternalError
	if errors.Is(err, os.ErrDeadlineExceeded) {
		code = frame.StallTimeout // no write progress for WriteTimeout
	}
	s.mu.Lock()
	s.e.WriteFailed(code, err)
	s.unlock()
	return false
}

// finish sends the WebSocket close, lets the peer answer for a moment and
// closes the connection (writer goroutine).
func (d *goDriver) finish(writeFailed bool) {
	s := d.s
	s.mu.Lock()
	code, reason := s.closeStatus()
	peerClosed := s.e.ClosedByPeer()
	closeBy := s.e.CloseBy()
	s.unlock()
	if !writeFailed {
		linger := time.Now().Add(min(closeLinger, s.cfg.CloseTimeout))
		if closeBy > 0 {
			if t := s.epoch.Add(closeBy); t.Before(linger) {
				linger = t
			}
		}
		_ = s.conn.SetWriteDeadline(linger)
		if peerClosed {
			_ = d.wsc.FlushControl()
		} else {
			_ = d.wsc.WriteClose(code, reason)
		}
		s.mu.Lock()
		s.lingering = true // a leader must not clear this deadline
		_ = s.conn.SetReadDeadline(linger)
		s.unlock()
		select {
		case <-s.readerDone:
		case <-time.After(time.Until(linger)):
		}
	}
	_ = s.conn.Close()
	<-s.readerDone
	s.unregister()
	// A resume that waits for sendMu (attach) now finds the connection
	// closed and gives up; a direct write cannot start (the writer is not
	// parked).
	s.sendMu.Unlock()
	close(s.done)
}
