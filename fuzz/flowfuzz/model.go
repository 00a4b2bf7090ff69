package flowfuzz

import (
	"math/big"
	"time"

	"github.com/wsmux/wsmux/flow"
)

// The reference model of the receiver's window the operations are checked
// against: the Budget charge of a growth, the floor and ceiling a limit
// sets, how Consume and Discard settle the window, and the auto-tuning test
// in arbitrary precision.

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

// fastEpochRef is the auto-tuning test, elapsed < 4 × (read/window) × rtt,
// in arbitrary precision.
func fastEpochRef(elapsed time.Duration, read, window int64, rtt time.Duration) bool {
	lhs := new(big.Int).Mul(big.NewInt(int64(elapsed)), big.NewInt(window))
	rhs := new(big.Int).Mul(big.NewInt(read), big.NewInt(int64(rtt)))
	rhs.Lsh(rhs, 2)
	return lhs.Cmp(rhs) < 0
}
