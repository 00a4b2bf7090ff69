package wsio

import (
	"math/bits"
	"sync"
)

// Message buffers come in power-of-two sizes from minMessageBuffer up, one
// pool per size: a buffer released by one connection (grown past, or
// dropped after a run of small messages) is the next grown buffer of
// another, instead of garbage.
const messageClasses = 24 // minMessageBuffer << 23 = 32 GiB: past any maxMessage

var messagePools [messageClasses]sync.Pool

// messageClass returns the class of the smallest buffer of at least n bytes.
func messageClass(n int) int {
	if n <= minMessageBuffer {
		return 0
	}
	return bits.Len(uint(n-1)) - bits.Len(uint(minMessageBuffer-1))
}

// getMessageBuffer returns a buffer of at least n bytes, len == cap, from
// its class's pool or new. Its contents are whatever they were.
func getMessageBuffer(n int) *[]byte {
	c := messageClass(n)
	if c >= messageClasses {
		b := make([]byte, n)
		return &b
	}
	if p, _ := messagePools[c].Get().(*[]byte); p != nil {
		return p
	}
	b := make([]byte, minMessageBuffer<<c)
	return &b
}

// putMessageBuffer gives *p back to its class's pool; it must not be used
// afterwards. Buffers that are not of a class size (and nil) are dropped.
func putMessageBuffer(p *[]byte) {
	if p == nil || len(*p) < minMessageBuffer || len(*p) != cap(*p) {
		return
	}
	c := messageClass(len(*p))
	if c >= messageClasses || minMessageBuffer<<c != len(*p) {
		return
	}
	messagePools[c].Put(p)
}
