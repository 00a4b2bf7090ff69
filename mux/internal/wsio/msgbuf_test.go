package wsio

import "testing"

func TestMessageBufferClasses(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{1, minMessageBuffer},
		{minMessageBuffer, minMessageBuffer},
		{minMessageBuffer + 1, 2 * minMessageBuffer},
		{64 << 10, 64 << 10},
		{64<<10 + 1, 128 << 10},
		{1 << 20, 1 << 20},
	} {
		p := getMessageBuffer(tc.n)
		if len(*p) != tc.size || cap(*p) != tc.size {
			t.Fatalf("getMessageBuffer(%d): len %d cap %d, want %d", tc.n, len(*p), cap(*p), tc.size)
		}
		putMessageBuffer(p)
	}
	// Buffers of other sizes are not pooled (a later Get would hand out
	// a buffer of the wrong class).
	odd, short := make([]byte, 5000), make([]byte, 4096, 8192)
	putMessageBuffer(&odd)
	putMessageBuffer(&short)
	putMessageBuffer(nil)
	for range 10 {
		if p := getMessageBuffer(5000); len(*p) != 8192 {
			t.Fatalf("got a %d-byte buffer for 5000 bytes", len(*p))
		}
	}
}

// A connection that alternates bursts of large messages with runs of small
// ones regrows its buffer from the pool: no allocation in steady state.
func TestMessageBufferRegrowNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	putMessageBuffer(getMessageBuffer(256 << 10))
	allocs := testing.AllocsPerRun(100, func() {
		putMessageBuffer(getMessageBuffer(256 << 10))
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per get/put", allocs)
	}
}
