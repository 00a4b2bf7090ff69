// Package flowfuzz holds the flow-control fuzz harness, FlowProgram. It
// imports only flow, fuzz/internal/program (which imports nothing) and the
// standard library, so flow's own tests
// (flow/fuzz_test.go) run it without building mux; package fuzz re-exports
// it beside the session harnesses and their go-fuzz entries.
package flowfuzz

import (
	"fmt"
	"math"
	"time"

	"github.com/wsmux/wsmux/flow"
	"github.com/wsmux/wsmux/fuzz/internal/program"
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
	in := &flowInput{program.New(data)}
	p.setup(in)
	if err := p.check("init"); err != nil {
		return 0, err
	}
	for ; ops < maxFlowOps && in.More(); ops++ {
		op := in.U8()
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
	switch sel := in.U8(); sel % 4 {
	case 0:
		p.budget = nil
	case 1:
		p.budget = &flowBudget{limit: math.MaxInt64}
	case 2:
		p.budget = &flowBudget{limit: int64(in.U32())}
	default:
		p.budget = &flowBudget{limit: 0}
	}
	p.raw.Init(in.window())
	p.reinit(in)
}

func (p *flowProg) reinit(in *flowInput) {
	cfg := flow.ReceiverConfig{Initial: in.window()}
	if sel := in.U8(); sel&0x80 != 0 {
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
