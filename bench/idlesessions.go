package bench

import (
	"runtime"
	"testing"
)

// IdleSessionsPerRun is how many sessions IdleSessions holds at once in
// one process (both ends: about two descriptors per session, three for
// the ceilings, which keep a listener per session).
const IdleSessionsPerRun = 1000

// IdleSessions sets up n sessions of tr (one loopback TCP connection each,
// both ends in this process), opens one stream on each and moves one byte
// each way on it, then reports the heap and stack growth and the
// goroutines added per idle session, both ends together, after two garbage
// collections. For the ceilings (tcp, ws) a session is one connection.
// The server side alone, with the clients in another process, is measured
// by `wsmux-bench idle`.
func IdleSessions(b *testing.B, tr Transport) {
	n := IdleSessionsPerRun
	var perSession, goroutines float64
	for range b.N {
		b.StopTimer()
		bytes, g := idleSessionsOnce(b, tr, n)
		perSession += bytes
		goroutines += g
	}
	b.ReportMetric(perSession/float64(b.N), "B/session")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/session")
	b.ReportMetric(float64(n), "sessions")
}

func idleSessionsOnce(b *testing.B, tr Transport, n int) (bytesPerSession, goroutinesPerSession float64) {
	// A first session warms up what the transport sets up once per process
	// (pools, the event loop).
	warm := newEnv(b, tr)
	c, s := warm.openPair()
	exchangeByte(b, warm, c, s)
	envs := make([]*env, 0, n)
	defer func() {
		for _, e := range envs {
			e.close()
		}
		warm.close()
	}()
	streams := make([]Stream, 0, 2*n)
	before, g0 := memNow(), runtime.NumGoroutine()
	b.StartTimer()
	for range n {
		e := newEnv(b, tr)
		envs = append(envs, e)
		c, s := e.openPair()
		exchangeByte(b, e, c, s)
		streams = append(streams, c, s)
	}
	b.StopTimer()
	after, g1 := memNow(), runtime.NumGoroutine()
	runtime.KeepAlive(streams)
	return (float64(after) - float64(before)) / float64(n), float64(g1-g0) / float64(n)
}

// exchangeByte moves one byte each way between c and s.
func exchangeByte(b *testing.B, e *env, c, s Stream) {
	buf := make([]byte, 1)
	if err := writeN(c, 1, 1); err != nil {
		e.fatalf("write: %v", err)
	}
	if err := readN(s, 1, buf); err != nil {
		e.fatalf("read: %v", err)
	}
	if err := writeN(s, 1, 1); err != nil {
		e.fatalf("write back: %v", err)
	}
	if err := readN(c, 1, buf); err != nil {
		e.fatalf("read back: %v", err)
	}
}
