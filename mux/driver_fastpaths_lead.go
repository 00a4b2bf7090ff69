package mux

import (
	"errors"
	"os"
	"time"
)

// Leader reads: a Read that waits for data reads the socket itself.
//
// Without them every received message costs a goroutine handoff: the
// reader goroutine reads it and wakes the Read waiting for it, and on a
// multi-core machine the runtime starts another processor's thread for
// the woken goroutine. For request/response traffic that handoff is most
// of the gap to a raw WebSocket (Echo64: 1.2 x raw ws with GOMAXPROCS=1,
// 1.5 x with 2 processors). With them, the goroutine that waits for the
// answer is the one the network poller wakes, as with a raw socket.
//
// The right to read the socket is a token (d.tok, guarded by s.mu):
//
//   - tokReader: the reader goroutine has it (the start, and whenever
//     nobody else wants it);
//   - tokLeader: the Read of d.leader has it and reads whole messages and
//     feeds them to the core (every stream's, not only its own) until its
//     own stream has something to return;
//   - tokFree: nobody: the last leader returned having drained its stream,
//     so its application is likely to Read again at once and take the
//     token back with no handoff at all. Anything else that waits on the
//     peer (a Write short of credit, Open, AcceptStream, Ping, a Read that
//     cannot lead) takes the token back for the reader goroutine
//     (reclaim), and the reader goroutine takes it itself once it stayed
//     free through one of its leadCheck periods. (A timer reset on every
//     Read would cost more than the handoff it saves: a timer that becomes
//     the earliest one interrupts the runtime's network poller.)
//
// The reader goroutine hands the token to a waiting Read (d.leadWant) when
// it has no buffered bytes left, that is when its next read would wait on
// the socket. A leader that returns with bytes still buffered for its
// stream gives the token straight back, since its next Read will not need
// the socket (bulk receivers).
//
// Nor does a Read lead while several streams receive (DATA for different
// streams in turn within the engine's last few milliseconds): each leader
// reads the others' messages too and passes the token on at every Read, so
// the socket goes unread between one Read's return and the next one's
// turn, while the reader goroutine would read on beside them. Two bulk
// streams moved 41 % more with the token left to it
// (docs/performance-history.md, "Few bulk streams").
//
// A leader waits for the next message in wsio.Conn.Wait, which consumes
// nothing: something that must end the leader's Read (a reset, CloseRead,
// a deadline being set, the session's end) sets a read deadline in the
// past on the connection (interruptLeader), which ends the Wait without
// losing a byte. Once a message has started the leader reads it whole, like
// the reader goroutine; Config.ReadTimeout bounds a partly received
// message either way. A Read with a deadline does not lead (its timer could
// not interrupt it), and leading is only used on plain TCP and Unix sockets
// and TLS over them, whose reads a deadline interrupts cleanly
// (wsio.Interruptible).

// The states of fastDriver.tok.
const (
	tokReader int8 = iota
	tokLeader
	tokFree
)

// leadCheck is the period at which the reader goroutine, while it does not
// hold the token, looks whether it stayed free and unused. While a leader
// holds the token with no other use of it (a Read that waits for an idle
// stream), the period doubles up to leadCheckMax, so an idle session wakes
// its reader goroutine once a second at most; a leader that then leaves the
// token free brings the period back to leadCheck.
const (
	leadCheck    = time.Millisecond
	leadCheckMax = time.Second
)

// aLongTimeAgo is a read deadline that interrupts a Wait at once.
var aLongTimeAgo = time.Unix(1, 0)

// leadHook lets tests wait for the token's moves instead of polling (s.mu
// held): period 0 when a leader is about to wait on the socket, -1 when
// the reader goroutine looks for a Read to hand the token to, -2 when a
// goroutine is about to wait for the socket (reclaim), otherwise a check
// of the reader goroutine that set the next one period from now.
var leadHook = func(d *fastDriver, period time.Duration) {}

// canLead reports whether a Read of st may take the token (s.mu held).
func (d *fastDriver) canLead(st *Stream) bool {
	s := d.s
	return d.leadOK && s.e.Err() == nil && !s.e.Suspended() && !s.lingering && !st.readDeadlineSet() && !s.e.ReceivingMany(s.now())
}

// takeLead gives the token to the waiting Read of st if it is free or was
// handed to st (s.mu held).
func (d *fastDriver) takeLead(st *Stream) bool {
	switch {
	case d.tok == tokLeader && d.leader == st:
		return true
	case d.tok == tokFree && d.canLead(st):
		d.tok, d.leader = tokLeader, st
		d.leadGen++
		return true
	}
	return false
}

// endLead takes the token from the leader st when its Read returns (s.mu
// held). keep: the Read returns data and left nothing buffered, so its
// application is likely to Read again soon: the token goes to another
// waiting Read or stays free; otherwise the reader goroutine gets it now.
func (d *fastDriver) endLead(st *Stream, keep bool) {
	s := d.s
	if d.tok != tokLeader || d.leader != st {
		return
	}
	d.leader = nil
	if keep && s.e.Err() == nil && !s.lingering {
		if w := d.leadWant; w != nil && w != st && w.rec.Lent() && d.canLead(w) {
			// Another Read waits: it leads next.
			d.leadWant = nil
			d.tok, d.leader = tokLeader, w
			d.leadGen++
			w.signalRead()
			return
		}
		d.tok = tokFree
		if now := s.now(); d.tickDue-now > 2*leadCheck {
			// The reader goroutine's check was backed off while this
			// leader waited: bring it near, so that a token nobody
			// takes again is back with it soon. (Only after a long
			// wait: a busy leader finds the check near already.)
			d.tickDue = now + leadCheck
			d.tokTimer.Reset(leadCheck)
		}
		return
	}
	d.tok = tokReader
	notify(d.tokCh)
}

// reclaim gives a free token back to the reader goroutine (s.mu held), for
// a goroutine about to wait for something only the socket can bring.
func (d *fastDriver) reclaim() {
	if d.tok == tokFree {
		d.tok = tokReader
		notify(d.tokCh)
	}
	leadHook(d, -2)
}

// giveBack returns the token of the leader st to the reader goroutine
// (s.mu held). failed: the leader's read failed; the reader goroutine then
// reads once itself, and meets the error, before it hands the token to
// anyone again.
func (d *fastDriver) giveBack(st *Stream, failed bool) {
	if d.tok == tokLeader && d.leader == st {
		d.leader = nil
		d.tok = tokReader
		d.leadFailed = d.leadFailed || failed
		notify(d.tokCh)
	}
}

// leadOnce is one turn of the leader st (s.mu held on entry and return,
// released while it waits): it waits for the next message and feeds it to
// the core. A nil error means the caller should look at its stream again:
// a message was fed, or the wait was interrupted. On an error the caller
// gives the token back; the reader goroutine then meets the error itself.
func (d *fastDriver) leadOnce() error {
	s := d.s
	d.peeking = true
	leadHook(d, 0)
	c := d.wsc // a resume replaces it, but not while a Read leads
	s.unlock()
	err := c.Wait()
	s.mu.Lock()
	d.peeking = false
	if d.interrupted {
		d.interrupted = false
		if !s.lingering {
			_ = s.conn.SetReadDeadline(time.Time{})
		}
		if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
			return nil
		}
	}
	if err != nil {
		return err
	}
	s.unlock()
	msg, err := c.ReadMessage()
	s.mu.Lock()
	if err != nil {
		return err
	}
	s.e.Feed(msg, s.now())
	s.stats.LeaderMessages.Add(1)
	return nil
}

// interruptLeader ends the leader's Wait (s.mu held): something changed
// that its Read must see.
func (d *fastDriver) interruptLeader() {
	s := d.s
	if d.peeking && !d.interrupted {
		d.interrupted = true
		_ = s.conn.SetReadDeadline(aLongTimeAgo)
	}
}

// handOff gives the token to a waiting Read, if there is one that may
// lead, and waits until it comes back (reader goroutine; s.mu not held).
// It is called only when no received bytes are buffered.
func (d *fastDriver) handOff() {
	s := d.s
	s.mu.Lock()
	leadHook(d, -1)
	st := d.leadWant
	if d.leadFailed || st == nil || d.tok != tokReader || !d.canLead(st) || !st.rec.Lent() {
		d.leadFailed = false
		s.unlock()
		return
	}
	d.leadWant = nil
	d.tok, d.leader = tokLeader, st
	d.leadGen++
	st.signalRead()
	gen := d.leadGen
	dead := s.deadCh
	period := leadCheck
	d.tickDue = s.now() + period
	d.tokTimer.Reset(period)
	for d.tok != tokReader {
		s.unlock()
		tick := false
		select {
		case <-d.tokCh:
		case <-d.tokTimer.C:
			tick = true
		case <-dead:
			dead = nil // the leader is interrupted and gives the token back
			tick = true
		}
		s.mu.Lock()
		if tick {
			d.ticks++
			if d.tok == tokFree && (d.leadGen == gen || s.e.Err() != nil) {
				d.tok = tokReader // free and unused for a whole period
				break
			}
			switch {
			case d.leadGen != gen || d.tok == tokFree:
				period = leadCheck // in use: look again soon
			default:
				period = min(2*period, leadCheckMax) // one leader waits on
			}
			gen = d.leadGen
			d.tickDue = s.now() + period
			d.tokTimer.Reset(period)
			leadHook(d, period)
		}
	}
	d.tokTimer.Stop()
	s.unlock()
	select {
	case <-d.tokCh: // stale
	default:
	}
}

// handOffIdle is the reader goroutine's look for a Read to hand the
// socket to, before each read (goDriver.beforeRead): only when no
// received bytes are buffered, and after a resume from the second message
// on (the first one retires the token the resume used).
func (d *fastDriver) handOffIdle() {
	s := d.s
	if d.leadOK && d.wsc.Buffered() == 0 && (s.res == nil || s.res.confirm == nil) {
		d.handOff()
	}
}

// readable interrupts the leader's Wait when st is its stream (s.mu held):
// its Read has something to return.
func (d *fastDriver) readable(st *Stream) {
	if d.leader == st {
		d.interruptLeader()
	}
}

// leadWoke is called when a Read of st whose buffer was lent wakes from
// its wait (s.mu held): it no longer waits for the token, and it reports
// whether the Read holds it (handed over by the reader goroutine). A Read
// that led (leadWait's again) does not call it: leadWait did the same.
func (d *fastDriver) leadWoke(st *Stream) bool {
	if d.leadWant == st {
		d.leadWant = nil
	}
	return d.tok == tokLeader && d.leader == st
}

// leadWait is called by a Read of st about to wait with its buffer lent
// (s.mu held). lead: it holds the token. When it may lead it reads the
// socket here rather than wait for the reader goroutine to hand the data
// over (again: look at the stream again); otherwise it gives back a token
// it holds (a deadline was set, or the session ends), or asks for the
// token for its next wait.
func (d *fastDriver) leadWait(st *Stream, lead bool) (leads, again bool) {
	switch {
	case (lead || d.takeLead(st)) && d.canLead(st):
		lead = true
		if err := d.leadOnce(); err != nil {
			d.giveBack(st, true)
			lead = false
		}
		if d.leadWant == st {
			d.leadWant = nil // as leadWoke: this Read looks at its stream again
		}
		return lead, true
	case lead || d.tok == tokLeader && d.leader == st:
		d.giveBack(st, false)
		lead = false
	case d.leadWant == nil && d.canLead(st):
		d.leadWant = st
	}
	return lead, false
}
