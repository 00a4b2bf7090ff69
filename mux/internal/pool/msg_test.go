package pool

import "testing"

func TestMsgClasses(t *testing.T) {
	for _, tc := range []struct{ n, size int }{
		{1, MinMsg},
		{MinMsg, MinMsg},
		{MinMsg + 1, 2 * MinMsg},
		{64 << 10, 64 << 10},
		{64<<10 + 1, 128 << 10},
		{1 << 20, 1 << 20},
	} {
		m := GetMsg(tc.n)
		if len(m.B) != tc.size || cap(m.B) != tc.size {
			t.Fatalf("GetMsg(%d): len %d cap %d, want %d", tc.n, len(m.B), cap(m.B), tc.size)
		}
		m.Release()
	}
	// Buffers of other sizes are not pooled (a later Get would hand out
	// a buffer of the wrong class).
	odd, short := &Msg{B: make([]byte, 5000)}, &Msg{B: make([]byte, 4096, 8192)}
	odd.refs.Store(1)
	short.refs.Store(1)
	odd.Release()
	short.Release()
	(*Msg)(nil).Release()
	for range 10 {
		if m := GetMsg(5000); len(m.B) != 8192 {
			t.Fatalf("got a %d-byte buffer for 5000 bytes", len(m.B))
		}
	}
}

// A buffer goes back to the pool only with its last reference: while a
// queue holds one, the reader's Release leaves it alone and Shared says so.
func TestMsgReferences(t *testing.T) {
	m := GetMsg(MinMsg)
	if m.Shared() {
		t.Fatal("a new buffer is shared")
	}
	m.Retain()
	if !m.Shared() {
		t.Fatal("a retained buffer is not shared")
	}
	m.Release()
	if m.Shared() || m.refs.Load() != 1 {
		t.Fatalf("after one release: refs %d", m.refs.Load())
	}
	m.Release()
	if m.refs.Load() != 0 {
		t.Fatalf("after the last release: refs %d", m.refs.Load())
	}
}

// A connection that alternates bursts of large messages with runs of small
// ones regrows its buffer from the pool: no allocation in steady state.
func TestMsgRegrowNoAlloc(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes sync.Pool drop items")
	}
	GetMsg(256 << 10).Release()
	allocs := testing.AllocsPerRun(100, func() {
		GetMsg(256 << 10).Release()
	})
	if allocs > 0 {
		t.Fatalf("%v allocations per get/put", allocs)
	}
}
