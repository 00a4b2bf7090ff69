package wsnb

import (
	"math/bits"
	"sync"
)

// Partial-message buffers come in power-of-two sizes from minBuffer up,
// one pool per size.
const (
	minBuffer = 4 << 10
	classes   = 20 // minBuffer << 19 = 2 GiB
)

var bufPools [classes]sync.Pool

func class(n int) int {
	if n <= minBuffer {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(uint(minBuffer-1))
}

// getBuffer returns a buffer of at least n bytes (len == cap).
func getBuffer(n int) *[]byte {
	c := class(n)
	if c >= classes {
		b := make([]byte, n)
		return &b
	}
	if p, _ := bufPools[c].Get().(*[]byte); p != nil {
		return p
	}
	b := make([]byte, minBuffer<<c)
	return &b
}

// putBuffer gives p back to its pool (nil is ignored).
func putBuffer(p *[]byte) {
	if p == nil {
		return
	}
	if c := class(cap(*p)); c < classes && minBuffer<<c == cap(*p) {
		bufPools[c].Put(p)
	}
}
