package bench

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// The memory workloads: what an idle stream costs (IdleStreams) and what a
// stream nobody reads makes the sender hold (NeverRead).

// memNow returns heap plus stack bytes in use after two garbage collections.
func memNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc + ms.StackInuse
}

// IdleStreams opens idleStreams streams (both ends in this process, no
// goroutine per stream in the harness) and reports the heap and stack growth
// and the goroutines added per open stream. One stream is opened first so that
// per-session state built lazily (SPDY's zlib contexts) is charged to the
// session. Ceilings hold fewer streams when file descriptors are short
// ("streams" says how many).
func IdleStreams(b *testing.B, tr Transport) {
	b.ReportAllocs()
	n := idleStreams
	if tr.MaxStreams > 0 && n > tr.MaxStreams-1 {
		n = tr.MaxStreams - 1
	}
	var perStream, goroutines float64
	for range b.N {
		b.StopTimer()
		bytes, g := idleOnce(b, tr, n)
		perStream += bytes
		goroutines += g
	}
	b.ReportMetric(perStream/float64(b.N), "B/stream")
	b.ReportMetric(goroutines/float64(b.N), "goroutines/stream")
	b.ReportMetric(float64(n), "streams")
}

func idleOnce(b *testing.B, tr Transport, n int) (bytesPerStream, goroutinesPerStream float64) {
	e := newEnv(b, tr)
	defer e.close()
	warmC, warmS := e.openPair()
	if err := writeN(warmC, 1, 1); err != nil {
		e.fatalf("warm-up write: %v", err)
	}
	if err := readN(warmS, 1, make([]byte, 1)); err != nil {
		e.fatalf("warm-up read: %v", err)
	}
	// openN's slices are allocated before the first measurement.
	cs, ss := make([]Stream, 0, n), make([]Stream, 0, n)
	before, g0 := memNow(), runtime.NumGoroutine()
	b.StartTimer()
	cs, ss = e.openNInto(n, cs, ss)
	b.StopTimer()
	after, g1 := memNow(), runtime.NumGoroutine()
	runtime.KeepAlive(cs)
	runtime.KeepAlive(ss)
	return (float64(after) - float64(before)) / float64(n), float64(g1-g0) / float64(n)
}

// openNInto is openN with caller-provided slices (capacity >= n).
func (e *env) openNInto(n int, cs, ss []Stream) ([]Stream, []Stream) {
	e.tb.Helper()
	accepted := make(chan error, 1)
	go func() {
		for len(ss) < n {
			s, err := e.server.Accept()
			if err != nil {
				accepted <- fmt.Errorf("accept stream %d: %w", len(ss), err)
				return
			}
			ss = append(ss, s)
		}
		accepted <- nil
	}()
	for range n {
		c, err := e.client.Open()
		if err != nil {
			e.teardown()
			<-accepted
			e.fatalf("open stream %d: %v", len(cs), err)
		}
		cs = append(cs, c)
	}
	timer := time.NewTimer(time.Minute)
	defer timer.Stop()
	select {
	case err := <-accepted:
		if err != nil {
			e.teardown()
			e.fatalf("%v", err)
		}
	case <-timer.C:
		e.teardown()
		<-accepted
		e.fatalf("%d streams opened, %d accepted after a minute", n, len(ss))
	}
	return cs, ss
}

// NeverRead opens two streams; the server never reads the first while the
// client writes bulkChunk after bulkChunk into it. Once no Write has returned
// for stallAfter, it reports the bytes the sender got rid of ("accepted-B"),
// the heap growth ("heap-B"), whether the second stream still echoes within a
// second ("other-stream-ok" 1/0) and whether the client session's Close
// returns within a second ("close-ok" 1/0). A sender never blocked is stopped
// at neverReadCap ("unbounded" 1).
func NeverRead(b *testing.B, tr Transport) {
	b.ReportAllocs()
	var accepted, heap, otherOK, closeOK, unbounded float64
	for range b.N {
		r := neverReadOnce(b, tr)
		accepted += r.accepted
		heap += r.heap
		otherOK += r.otherOK
		closeOK += r.closeOK
		unbounded += r.unbounded
	}
	n := float64(b.N)
	b.ReportMetric(accepted/n, "accepted-B")
	b.ReportMetric(heap/n, "heap-B")
	b.ReportMetric(otherOK/n, "other-stream-ok")
	b.ReportMetric(closeOK/n, "close-ok")
	b.ReportMetric(unbounded/n, "unbounded")
}

type neverReadResult struct{ accepted, heap, otherOK, closeOK, unbounded float64 }

var errCapReached = errors.New("never-read cap reached")

func neverReadOnce(b *testing.B, tr Transport) (r neverReadResult) {
	e := newEnv(b, tr)
	defer e.close()
	cs, ss := e.openN(2)
	stalledC, otherC, otherS := cs[0], cs[1], ss[1]
	_ = ss[0] // never read
	e.spawn(func() error { return echo(otherS, echoSize) })
	req, resp := payload[:echoSize], make([]byte, echoSize)
	if err := roundTrip(otherC, req, resp); err != nil { // warm-up
		e.fatalf("echo: %v", err)
	}
	before := memNow()

	var written atomic.Int64
	writerDone := make(chan error, 1)
	go func() {
		for written.Load() < neverReadCap {
			if _, err := stalledC.Write(payload[:bulkChunk]); err != nil {
				writerDone <- err
				return
			}
			written.Add(bulkChunk)
		}
		writerDone <- errCapReached
	}()
	last, lastChange := int64(-1), time.Now()
	for {
		select {
		case err := <-writerDone:
			writerDone <- err
			if err != errCapReached {
				e.fatalf("write to the unread stream: %v", err)
			}
			r.unbounded = 1
		case <-time.After(10 * time.Millisecond):
			if w := written.Load(); w != last {
				last, lastChange = w, time.Now()
				continue
			}
			if time.Since(lastChange) < stallAfter {
				continue
			}
		}
		break
	}
	r.accepted = float64(written.Load())
	r.heap = float64(memNow()) - float64(before)

	if ok := within(time.Second, func() error { return roundTrip(otherC, req, resp) }); ok {
		r.otherOK = 1
	}
	e.closing.Store(true) // from here on, the echo goroutine fails as expected
	if ok := within(time.Second, e.client.Close); ok {
		r.closeOK = 1
	}
	e.teardown()
	<-writerDone
	return r
}

// within runs f in a goroutine and reports whether it returned nil within d.
// If it did not, f keeps running until the pair is torn down.
func within(d time.Duration, f func() error) bool {
	done := make(chan error, 1)
	go func() { done <- f() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err == nil
	case <-t.C:
		return false
	}
}
