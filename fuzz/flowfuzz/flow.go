// Package flowfuzz holds the flow-control fuzz harness, FlowProgram. It
// imports only flow and the standard library, so flow's own tests
// (flow/fuzz_test.go) run it without building mux; package fuzz re-exports
// it beside the session harnesses and their go-fuzz entries.
package flowfuzz

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"time"

	"github.com/wsmux/wsmux/flow"
)

// maxFlowOps bounds the length of one FlowProgram run.
const maxFlowOps = 1 << 12

// FlowProgram interprets data as a program of flow-control operations on a
// flow.Receiver (us) and a flow.Sender (the peer's view of the credit we
// granted it), joined by a queue of in-flight WINDOW_UPDATE deltas. The
// peer is honest in some operations and cheats in others; a memory Budget
// sometimes refuses growth; a fake clock and RTT drive auto-tuning; SetLimit
// caps the window (below, at and above Initial and Max) and removes the cap.
//
// After every operation it checks the invariants: no credit is negative,
// the receiver accepts a DATA frame exactly when it fits the outstanding
// credit and never more than it granted in total, credit is conserved
// (Outstanding + Buffered + Pending == Window), the peer's credit plus the
// in-flight updates equals the receiver's outstanding credit, the window
// stays within [min(Initial, MinLimitWindow), Max], the window, the credit
// and WINDOW_UPDATE deltas follow a reference model of the quarter window,
// auto-tuning and limit (shrink and restore) rules, and Budget reservations
// balance (exactly the growth above Initial). It returns the first
// violation, or nil. It never panics on any input.
func FlowProgram(data []byte) error {
	_, err := runFlowProgram(data)
	return err
}

// RunFlowProgram is FlowProgram that also counts the operations it ran
// (go-fuzz keeps inputs that ran at least one in its corpus).
func RunFlowProgram(data []byte) (ops int, err error) { return runFlowProgram(data) }

// runFlowProgram is FlowProgram that also counts the operations it ran.
func runFlowProgram(data []byte) (ops int, err error) {
	var p flowProg
	in := &flowInput{b: data}
	p.setup(in)
	if err := p.check("init"); err != nil {
		return 0, err
	}
	for ; ops < maxFlowOps && in.more(); ops++ {
		op := in.u8()
		if err := p.step(op, in); err != nil {
			return ops, fmt.Errorf("op %d (code %d): %w", ops, op%flowOpCount, err)
		}
		if err := p.check("after op"); err != nil {
			return ops, fmt.Errorf("op %d (code %d): %w", ops, op%flowOpCount, err)
		}
	}
	p.r.Release()
	p.released = true
	return ops, p.check("final release")
}

// flowInput reads operands from the program; past the end it yields zeros.
type flowInput struct{ b []byte }

func (in *flowInput) more() bool { return len(in.b) > 0 }

func (in *flowInput) u8() byte {
	if len(in.b) == 0 {
		return 0
	}
	v := in.b[0]
	in.b = in.b[1:]
	return v
}

func (in *flowInput) u16() uint16 { return uint16(in.u8())<<8 | uint16(in.u8()) }

func (in *flowInput) u32() uint32 { return uint32(in.u16())<<16 | uint32(in.u16()) }

// size reads a byte count below 2^31, spread over all magnitudes.
func (in *flowInput) size() int64 {
	v := int64(in.u16())
	return v << (in.u8() & 15)
}

// window reads a window size, favouring the interesting ones.
func (in *flowInput) window() uint32 {
	switch in.u8() % 8 {
	case 0:
		return 0
	case 1:
		return 1
	case 2:
		return 4
	case 3:
		return 1000
	case 4:
		return 256 << 10
	case 5:
		return 16 << 20
	case 6:
		return flow.MaxWindow
	default:
		return in.u32()
	}
}

// flowBudget is a Budget with a limit that can be told to refuse.
type flowBudget struct {
	limit  int64
	used   int64
	refuse bool
	err    error
}

func (b *flowBudget) Reserve(n int64) bool {
	if n <= 0 {
		b.err = fmt.Errorf("Budget.Reserve(%d)", n)
		return false
	}
	if !b.approves(n, 0) {
		return false
	}
	b.used += n
	return true
}

func (b *flowBudget) Release(n int64) {
	if n <= 0 || n > b.used {
		b.err = fmt.Errorf("Budget.Release(%d) with %d reserved", n, b.used)
		return
	}
	b.used -= n
}

// approves reports whether Reserve(n) would succeed after rel more bytes
// were released; n <= 0 is never asked for, so it is approved.
func (b *flowBudget) approves(n, rel int64) bool {
	return b == nil || n <= 0 || (!b.refuse && n <= b.limit-(b.used-rel))
}

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

type flowProg struct {
	r    flow.Receiver
	peer flow.Sender // the peer's credit, as the peer sees it
	raw  flow.Sender // a sender fed arbitrary deltas

	budget   *flowBudget // nil: no Budget
	initial  int64       // effective (clamped) initial window
	max      int64       // effective (clamped) maximum window
	limit    uint32      // last SetLimit since Init; 0: none
	released bool

	inflight []uint32 // deltas sent but not yet delivered to the peer
	granted  int64    // total credit ever granted since Init
	received int64    // total bytes ever accepted since Init

	now, rtt time.Duration

	// reference model of the auto-tuning epoch
	epochStarted bool
	epochStart   time.Duration
	epochRead    int64
}

func (p *flowProg) setup(in *flowInput) {
	switch sel := in.u8(); sel % 4 {
	case 0:
		p.budget = nil
	case 1:
		p.budget = &flowBudget{limit: math.MaxInt64}
	case 2:
		p.budget = &flowBudget{limit: int64(in.u32())}
	default:
		p.budget = &flowBudget{limit: 0}
	}
	p.raw.Init(in.window())
	p.reinit(in)
}

func (p *flowProg) reinit(in *flowInput) {
	cfg := flow.ReceiverConfig{Initial: in.window()}
	if sel := in.u8(); sel&0x80 != 0 {
		m := uint64(cfg.Initial) << (sel & 7)
		cfg.Max = uint32(min(m, math.MaxUint32))
	} else {
		cfg.Max = in.window()
	}
	if p.budget != nil {
		cfg.Budget = p.budget // never a typed nil
	}
	p.r.Init(cfg)
	p.initial = min(int64(cfg.Initial), flow.MaxWindow)
	p.max = max(min(int64(cfg.Max), flow.MaxWindow), p.initial)
	p.limit = 0 // Init starts afresh
	p.released = false
	p.peer.Init(cfg.Initial)
	p.inflight = p.inflight[:0]
	p.granted = p.initial
	p.received = 0
	p.epochStarted = false
	p.epochStart = 0
	p.epochRead = 0
}

type flowSnap struct{ o, b, pd, w int64 }

func (p *flowProg) snap() flowSnap {
	return flowSnap{p.r.Outstanding(), p.r.Buffered(), p.r.Pending(), int64(p.r.Window())}
}

func (p *flowProg) announce(delta uint32) {
	if delta > 0 {
		p.inflight = append(p.inflight, delta)
		p.granted += int64(delta)
	}
}

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
		if k := int8(in.u8()); k == math.MinInt8 {
			n = int64(in.u32())
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
		sel := in.u8()
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
			delta := int64(in.u32()) - int64(in.u32())
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
		d := in.u32()
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
		if sel := in.u8(); sel&1 == 0 {
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
		sel := in.u8()
		d := time.Duration(in.u16()) << (sel & 31)
		if sel&0xe0 == 0xe0 {
			p.now -= d / 16 // a clock that misbehaves must not break anything
		} else {
			p.now += d
		}

	case flowOpRTT:
		switch sel := in.u8(); sel % 8 {
		case 0:
			p.rtt = 0
		case 1:
			p.rtt = -time.Duration(in.u16())
		default:
			p.rtt = time.Duration(in.u16()) << (sel >> 3)
		}

	case flowOpBudget:
		if p.budget == nil {
			return nil
		}
		switch sel := in.u8(); sel % 4 {
		case 0:
			p.budget.refuse = !p.budget.refuse
		case 1:
			p.budget.limit = p.budget.used + int64(in.u32())
		case 2:
			p.budget.limit = p.budget.used // no more growth
		default:
			p.budget.limit = math.MaxInt64
		}

	case flowOpDiscard:
		s := p.snap()
		var n int64
		switch sel := in.u8(); sel & 7 {
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

// budgetApproves reports whether the Budget would grant need bytes (no
// request at all for need <= 0) after rel more bytes were released.
func (p *flowProg) budgetApproves(need, rel int64) bool {
	return p.budget.approves(need, rel) // nil: no Budget
}

// charge is the Budget reservation a growth of a window w by g > 0 needs:
// only the part above Initial is charged (the reservation is the growth
// above Initial).
func (p *flowProg) charge(w, g int64) int64 {
	return max(w+g-p.initial, 0) - max(w-p.initial, 0)
}

// floor is the smallest window a limit can hold the receiver to.
func (p *flowProg) floor() int64 { return min(p.initial, flow.MinLimitWindow) }

// ceiling is the largest window the current limit allows.
func (p *flowProg) ceiling() int64 {
	if p.limit == 0 {
		return p.max
	}
	return max(p.floor(), min(p.max, int64(p.limit)))
}

// settle models what Consume and Discard do once n bytes moved to pending:
// a window above the ceiling shrinks by withholding pending credit (never
// announced credit), releasing the Budget for the part above Initial; a
// window below min(Initial, ceiling) is raised back to it, the increase
// pending and free of charge, unless Release was called. It returns the new
// window and pending credit and the bytes the shrink released.
func (p *flowProg) settle(w, pd int64) (w2, pd2, rel int64) {
	c := p.ceiling()
	if w > c && pd > 0 {
		s := min(w-c, pd)
		if !p.released {
			rel = max(w-p.initial, 0) - max(w-s-p.initial, 0)
		}
		w -= s
		pd -= s
	}
	if t := min(p.initial, c); w < t && !p.released {
		pd += t - w
		w = t
	}
	return w, pd, rel
}

// setLimit runs SetLimit with a limit chosen by kind (0-31) to land in
// every region: none, below MinLimitWindow, around the floor, between the
// floor and Initial, around Initial, between Initial and Max, around Max,
// above Max, near the current window, and arbitrary. It always reads three
// operand bytes. SetLimit itself changes nothing but the ceiling.
func (p *flowProg) setLimit(kind byte, in *flowInput) error {
	v := int64(in.u16())
	k := in.u8()
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

// fastEpochRef is the auto-tuning test, elapsed < 4 × (read/window) × rtt,
// in arbitrary precision.
func fastEpochRef(elapsed time.Duration, read, window int64, rtt time.Duration) bool {
	lhs := new(big.Int).Mul(big.NewInt(int64(elapsed)), big.NewInt(window))
	rhs := new(big.Int).Mul(big.NewInt(read), big.NewInt(int64(rtt)))
	rhs.Lsh(rhs, 2)
	return lhs.Cmp(rhs) < 0
}

func (p *flowProg) check(where string) error {
	s := p.snap()
	var inflight int64
	for _, d := range p.inflight {
		inflight += int64(d)
	}
	pa, ra := p.peer.Available(), p.raw.Available()
	switch {
	case s.o < 0 || s.b < 0 || s.pd < 0:
		return fmt.Errorf("%s: negative credit %+v", where, s)
	case pa < 0 || pa > flow.MaxWindow || ra < 0 || ra > flow.MaxWindow:
		return fmt.Errorf("%s: sender credit out of range: peer %d raw %d", where, pa, ra)
	case s.o+s.b+s.pd != s.w:
		return fmt.Errorf("%s: credit not conserved: %+v", where, s)
	case s.w > p.max || p.max > flow.MaxWindow || s.w < p.floor():
		return fmt.Errorf("%s: window %d outside [%d, %d]", where, s.w, p.floor(), p.max)
	case s.pd > 0 && 4*s.pd >= s.w:
		return fmt.Errorf("%s: update due but not sent: %+v", where, s)
	case p.received > p.granted:
		return fmt.Errorf("%s: received %d > granted %d", where, p.received, p.granted)
	case s.o != p.granted-p.received:
		return fmt.Errorf("%s: outstanding %d != granted %d - received %d", where, s.o, p.granted, p.received)
	case pa+inflight != s.o:
		return fmt.Errorf("%s: peer credit %d + in flight %d != outstanding %d", where, pa, inflight, s.o)
	}
	if b := p.budget; b != nil {
		switch {
		case b.err != nil:
			return fmt.Errorf("%s: %w", where, b.err)
		case b.used < 0 || b.used > b.limit:
			return fmt.Errorf("%s: budget used %d of %d", where, b.used, b.limit)
		case !p.released && b.used != max(s.w-p.initial, 0):
			return fmt.Errorf("%s: budget used %d for window %d, Initial %d", where, b.used, s.w, p.initial)
		case p.released && b.used != 0:
			return fmt.Errorf("%s: budget still holds %d after Release", where, b.used)
		}
	}
	return nil
}
