package flowfuzz

import (
	"fmt"

	"github.com/wsmux/wsmux/flow"
)

// check: the invariants a flow program checks after every operation.

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
