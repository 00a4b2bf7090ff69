package flowfuzz

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/wsmux/wsmux/flow"
)

// Running a flow program: the opcodes, and step, which decodes one
// operation, runs it and checks its outcome, with its larger parts
// peerSpend, read and setLimit.

// The operations of a flow program.
const (
	flowOpSend     = iota // honest peer sends what it may
	flowOpCheat           // peer sends Outstanding+k bytes, k in [-128, 127], or a huge amount
	flowOpRead            // application reads
	flowOpDeliver         // an in-flight WINDOW_UPDATE reaches the peer
	flowOpRawGrant        // arbitrary WINDOW_UPDATE deltas and initial-window changes (Adjust) on a second Sender
	flowOpEnsure          // EnsureWindow
	flowOpTime            // the clock moves (rarely backwards)
	flowOpRTT             // the RTT estimate changes
	flowOpBudget          // the Budget changes its mind
	flowOpDiscard         // bytes for a closed stream; selector 6 (mod 8): SetLimit
	flowOpRelease         // Release (stream end)
	flowOpReinit          // Init again (reuse)
	flowOpCount
)

func (p *flowProg) step(op byte, in *flowInput) error {
	switch op % flowOpCount {
	case flowOpSend:
		n := min(in.size(), p.peer.Available())
		if !p.peer.Consume(int(n)) {
			return fmt.Errorf("Sender.Consume(%d) refused with %d available", n, p.peer.Available())
		}
		if err := p.r.Receive(int(n)); err != nil {
			return fmt.Errorf("honest Receive(%d) with %d outstanding: %v", n, p.r.Outstanding(), err)
		}
		p.received += n

	case flowOpCheat:
		s := p.snap()
		var n int64
		if k := int8(in.U8()); k == math.MinInt8 {
			n = int64(in.U32())
		} else {
			n = max(s.o+int64(k), 0)
		}
		n = min(n, math.MaxInt32) // fits int everywhere
		err := p.r.Receive(int(n))
		if n > s.o {
			if !errors.Is(err, flow.ErrFlowControl) {
				return fmt.Errorf("Receive(%d) with %d outstanding: got %v, want ErrFlowControl", n, s.o, err)
			}
			if p.snap() != s {
				return fmt.Errorf("rejected Receive(%d) changed the state", n)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("Receive(%d) with %d outstanding: %v", n, s.o, err)
		}
		return p.peerSpend(n)

	case flowOpRead:
		return p.read(in.size())

	case flowOpDeliver:
		if len(p.inflight) == 0 {
			return nil
		}
		d := p.inflight[0]
		p.inflight = p.inflight[1:]
		if err := p.peer.Grant(d); err != nil {
			return fmt.Errorf("Grant(%d) of an honest update with %d available: %v", d, p.peer.Available(), err)
		}

	case flowOpRawGrant:
		sel := in.U8()
		if sel%3 == 0 {
			n := in.size()
			a := p.raw.Available()
			ok := p.raw.Consume(int(n))
			if ok != (n <= a) || (ok && p.raw.Available() != a-n) || (!ok && p.raw.Available() != a) {
				return fmt.Errorf("Sender.Consume(%d) with %d available: %v, now %d", n, a, ok, p.raw.Available())
			}
			return nil
		}
		a, debt := p.raw.Available(), p.raw.Debt()
		if sel%3 == 2 {
			// A change of the initial window: up to MaxWindow either way.
			delta := int64(in.U32()) - int64(in.U32())
			delta = max(min(delta, flow.MaxWindow), -flow.MaxWindow)
			err := p.raw.Adjust(delta)
			wantAvail, wantDebt := a, debt
			var want error
			switch {
			case delta >= 0 && delta-min(debt, delta) > flow.MaxWindow-a:
				want = flow.ErrOverflow
			case delta >= 0:
				wantDebt = debt - min(debt, delta)
				wantAvail = a + delta - min(debt, delta)
			default:
				take := min(-delta, a)
				wantAvail, wantDebt = a-take, debt+(-delta-take)
			}
			if err != want || p.raw.Available() != wantAvail || p.raw.Debt() != wantDebt {
				return fmt.Errorf("Adjust(%d) with %d available, %d owed: %v, now %d available, %d owed (want %v, %d, %d)",
					delta, a, debt, err, p.raw.Available(), p.raw.Debt(), want, wantAvail, wantDebt)
			}
			return nil
		}
		d := in.U32()
		err := p.raw.Grant(d)
		paid := min(debt, int64(d))
		var want error
		switch {
		case d == 0:
			want = flow.ErrZeroDelta
		case a+int64(d)-paid > flow.MaxWindow:
			want = flow.ErrOverflow
		}
		if err != want {
			return fmt.Errorf("Grant(%d) with %d available, %d owed: got %v, want %v", d, a, debt, err, want)
		}
		if got, exp := p.raw.Available(), a+int64(d)-paid; (err == nil && got != exp) || (err != nil && got != a) {
			return fmt.Errorf("Grant(%d) with %d available, %d owed left %d", d, a, debt, got)
		}
		if err == nil && p.raw.Debt() != debt-paid {
			return fmt.Errorf("Grant(%d) with %d owed left %d owed", d, debt, p.raw.Debt())
		}

	case flowOpEnsure:
		var w uint32
		if sel := in.U8(); sel&1 == 0 {
			w = in.window()
		} else {
			w = uint32(min(uint64(p.r.Window())*uint64(sel>>1), math.MaxUint32))
		}
		s := p.snap()
		// The target is capped at the ceiling; only the part of the
		// growth above Initial is asked of the Budget.
		g := min(int64(w), flow.MaxWindow, p.ceiling()) - s.w
		if g <= 0 || p.released || !p.budgetApproves(p.charge(s.w, g), 0) {
			g = 0
		}
		delta := p.r.EnsureWindow(w)
		if int64(delta) != g {
			return fmt.Errorf("EnsureWindow(%d) at window %d ceiling %d (max %d limit %d): delta %d, want %d",
				w, s.w, p.ceiling(), p.max, p.limit, delta, g)
		}
		if got := p.snap(); got != (flowSnap{s.o + g, s.b, s.pd, s.w + g}) {
			return fmt.Errorf("EnsureWindow(%d): state %+v from %+v", w, got, s)
		}
		p.announce(delta)

	case flowOpTime:
		sel := in.U8()
		d := time.Duration(in.U16()) << (sel & 31)
		if sel&0xe0 == 0xe0 {
			p.now -= d / 16 // a clock that misbehaves must not break anything
		} else {
			p.now += d
		}

	case flowOpRTT:
		switch sel := in.U8(); sel % 8 {
		case 0:
			p.rtt = 0
		case 1:
			p.rtt = -time.Duration(in.U16())
		default:
			p.rtt = time.Duration(in.U16()) << (sel >> 3)
		}

	case flowOpBudget:
		if p.budget == nil {
			return nil
		}
		switch sel := in.U8(); sel % 4 {
		case 0:
			p.budget.refuse = !p.budget.refuse
		case 1:
			p.budget.limit = p.budget.used + int64(in.U32())
		case 2:
			p.budget.limit = p.budget.used // no more growth
		default:
			p.budget.limit = math.MaxInt64
		}

	case flowOpDiscard:
		s := p.snap()
		var n int64
		switch sel := in.U8(); sel & 7 {
		case 7:
			// A cheating peer; only at Outstanding == MaxWindow does the
			// clamp make it an honest use of credit still in flight.
			n = min(s.o+1+int64(sel>>3), math.MaxInt32)
		case 6:
			// SetLimit. Its operand has the size of a discard's, so
			// that the rest of a program decodes as it did before
			// selector 6 (then one more honest discard) was taken.
			return p.setLimit(sel>>3, in)
		default:
			n = min(in.size(), p.peer.Available())
		}
		delta, err := p.r.Discard(int(n))
		if n > s.o {
			if !errors.Is(err, flow.ErrFlowControl) || delta != 0 || p.snap() != s {
				return fmt.Errorf("Discard(%d) with %d outstanding: %d, %v", n, s.o, delta, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("Discard(%d) with %d outstanding: %v", n, s.o, err)
		}
		if err := p.peerSpend(n); err != nil {
			return err
		}
		if n <= 0 {
			if delta != 0 || p.snap() != s {
				return fmt.Errorf("Discard(%d) at %+v: delta %d state %+v", n, s, delta, p.snap())
			}
			return nil
		}
		w, pd, _ := p.settle(s.w, s.pd+n)
		var want int64
		if pd > 0 && 4*pd >= w {
			want = pd
		}
		if got := p.snap(); int64(delta) != want || got != (flowSnap{s.o - n + want, s.b, pd - want, w}) {
			return fmt.Errorf("Discard(%d) at %+v (ceiling %d): delta %d state %+v, want delta %d window %d pending %d",
				n, s, p.ceiling(), delta, got, want, w, pd-want)
		}
		p.announce(delta)

	case flowOpRelease:
		p.r.Release()
		p.r.Release() // idempotent
		p.released = true

	case flowOpReinit:
		p.reinit(in)
	}
	return nil
}

// peerSpend accounts for n bytes the receiver accepted from the peer. A
// cheating peer may have used credit from updates still in flight: take it
// from the peer's current credit first, then from the queue.
func (p *flowProg) peerSpend(n int64) error {
	p.received += n
	a := min(n, p.peer.Available())
	p.peer.Consume(int(a))
	for rest := n - a; rest > 0; {
		if len(p.inflight) == 0 {
			return fmt.Errorf("receiver accepted %d bytes the peer never had", rest)
		}
		if d := int64(p.inflight[0]); d <= rest {
			rest -= d
			p.inflight = p.inflight[1:]
		} else {
			p.inflight[0] = uint32(d - rest)
			rest = 0
		}
	}
	return nil
}

// read performs an application read of n bytes and checks the returned
// delta against a reference model of the quarter-window and auto-tuning
// rules.
func (p *flowProg) read(n int64) error {
	s := p.snap()
	c := min(n, s.b)
	// The Budget as it was before Consume could release or reserve
	// anything.
	var b0 *flowBudget
	if p.budget != nil {
		cp := *p.budget
		b0 = &cp
	}
	delta := p.r.Consume(int(n), p.now, p.rtt)
	if c <= 0 {
		if delta != 0 || p.snap() != s {
			return fmt.Errorf("Consume(%d) of nothing at %+v: delta %d", n, s, delta)
		}
		return nil
	}
	if !p.epochStarted {
		p.epochStarted = true
		p.epochStart = p.now
	}
	p.epochRead += c
	// The limit acts first: the window shrinks (withholding credit) or is
	// restored; the update rule and auto-tuning then see the new window.
	w0, pd, rel := p.settle(s.w, s.pd+c)
	if pd == 0 || 4*pd < w0 {
		if got := p.snap(); delta != 0 || got != (flowSnap{s.o, s.b - c, pd, w0}) {
			return fmt.Errorf("Consume(%d) at %+v (ceiling %d): delta %d state %+v, want no update, window %d pending %d",
				n, s, p.ceiling(), delta, got, w0, pd)
		}
		return nil
	}
	w := w0
	if 2*p.epochRead > w0 && p.rtt > 0 {
		// Doubling, capped at the ceiling; the Budget is asked for the
		// part above Initial after the shrink released its share.
		g := min(2*w0, p.ceiling()) - w0
		if g > 0 && !p.released && fastEpochRef(max(p.now-p.epochStart, 0), p.epochRead, w0, p.rtt) &&
			b0.approves(p.charge(w0, g), rel) {
			w += g
		}
		p.epochStart = p.now
		p.epochRead = 0
	}
	want := pd + w - w0
	if got := p.snap(); int64(delta) != want || got != (flowSnap{s.o + want, s.b - c, 0, w}) {
		return fmt.Errorf("Consume(%d) at %+v (now %v rtt %v ceiling %d): delta %d state %+v, want delta %d window %d",
			n, s, p.now, p.rtt, p.ceiling(), delta, got, want, w)
	}
	p.announce(delta)
	return nil
}

// setLimit runs SetLimit with a limit chosen by kind (0-31) to land in
// every region: none, below MinLimitWindow, around the floor, between the
// floor and Initial, around Initial, between Initial and Max, around Max,
// above Max, near the current window, and arbitrary. It always reads three
// operand bytes. SetLimit itself changes nothing but the ceiling.
func (p *flowProg) setLimit(kind byte, in *flowInput) error {
	v := int64(in.U16())
	k := in.U8()
	w := int64(p.r.Window())
	var l int64
	switch kind & 15 {
	case 0:
		l = 0 // no limit
	case 1:
		l = 1 + v%(flow.MinLimitWindow-1) // below MinLimitWindow
	case 2:
		l = flow.MinLimitWindow - 1 + v%3
	case 3:
		l = p.floor() - 1 + v%3
	case 4:
		l = p.floor() + v%(p.initial-p.floor()+1) // [floor, Initial]
	case 5:
		l = p.initial - 1 + v%3
	case 6:
		l = p.initial + (v<<(k&31))%(p.max-p.initial+1) // [Initial, Max]
	case 7:
		l = p.max - 1 + v%3
	case 8:
		l = p.max + 1 + v<<(k&31) // above Max
	case 9:
		l = w - 1 + v%3
	case 10:
		l = w / 2
	case 11:
		l = 2 * w
	case 12:
		l = [...]int64{flow.MaxWindow, flow.MaxWindow + 1, math.MaxUint32}[v%3]
	case 13:
		l = v << (k & 31) // anything
	case 14:
		l = (p.floor() + p.initial) / 2
	default:
		l = (p.initial + p.max) / 2
	}
	limit := uint32(min(max(l, 0), math.MaxUint32))
	s := p.snap()
	p.r.SetLimit(limit)
	p.limit = limit
	if got := p.snap(); got != s {
		return fmt.Errorf("SetLimit(%d) changed the state from %+v to %+v", limit, s, got)
	}
	return nil
}
