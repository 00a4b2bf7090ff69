package flowfuzz

import "fmt"

// The memory Budget a flow program's receiver may run with: operations
// move its limit or make it refuse, and check verifies that its
// reservations balance.

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
