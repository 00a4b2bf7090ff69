package bench

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Workload is one measurement, run once per transport. Its benchmark is
// Benchmark<Name>/transport=<transport>[/<Variant>].
type Workload struct {
	Name    string // "Bulk1", "Echo64", ...
	Variant string // sub-benchmark under the transport ("dir=c2s"), or ""
	// Primary is the metric the tables compare transports on; Metrics are
	// all the metrics shown, in order (Primary among them).
	Primary string
	Metrics []string
	// Heavy workloads move a gigabyte or open ten thousand streams per
	// iteration.
	Heavy bool
	Fn    func(b *testing.B, tr Transport)
}

// FullName is the workload's name in results and tables: Name, or
// Name/Variant.
func (w Workload) FullName() string {
	if w.Variant == "" {
		return w.Name
	}
	return w.Name + "/" + w.Variant
}

// Sizes of the workloads.
const (
	bulkChunk      = 32 << 10 // bytes per Write in bulk transfers
	streamsPayload = 1 << 20  // bytes each stream sends in StreamsN
	echoSize       = 64       // request and response size in Echo64 and Interactive
	idleStreams    = 10000    // streams held open in IdleStreams
	idleEchoes     = 2000     // unloaded echoes Interactive measures first
	neverReadCap   = 64 << 20 // NeverRead stops a sender that was never blocked here
	stallAfter     = 500 * time.Millisecond
)

var standardMetrics = []string{"ns/op", "B/op", "allocs/op"}

// throughputMetrics are the columns of the bulk workloads: MB/s, then what a
// MiB costs in CPU.
var throughputMetrics = []string{"MB/s", CPUPerMiB, "ns/op", "B/op", "allocs/op"}

// Workloads returns every workload in table order.
func Workloads() []Workload {
	return []Workload{
		{Name: "Bulk1", Variant: "dir=c2s", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { Bulk1(b, tr, true) }},
		{Name: "Bulk1", Variant: "dir=s2c", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { Bulk1(b, tr, false) }},
		{Name: "Streams8", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { StreamsN(b, tr, 8) }},
		{Name: "Streams64", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { StreamsN(b, tr, 64) }},
		{Name: "Streams1024", Primary: "MB/s", Metrics: throughputMetrics, Heavy: true,
			Fn: func(b *testing.B, tr Transport) { StreamsN(b, tr, 1024) }},
		{Name: "Echo64", Primary: "ns/op", Metrics: standardMetrics, Fn: Echo64},
		{Name: "OpenClose", Primary: "ns/op", Metrics: standardMetrics, Fn: OpenClose},
		{Name: "Interactive", Primary: "p99-ns", Metrics: []string{"p50-ns", "p99-ns", "bulk-MB/s", "idle-p50-ns", "idle-p99-ns", "B/op", "allocs/op"}, Fn: Interactive},
		{Name: "IdleStreams", Primary: "B/stream", Metrics: []string{"B/stream", "goroutines/stream", "streams"}, Heavy: true, Fn: IdleStreams},
		{Name: "NeverRead", Primary: "accepted-B", Metrics: []string{"accepted-B", "heap-B", "other-stream-ok", "close-ok", "unbounded"}, Fn: NeverRead},
	}
}

// payload is random data the workloads send (nothing here compresses data,
// but random bytes keep it honest should a transport ever try).
var payload = func() []byte {
	p := make([]byte, streamsPayload)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range p {
		p[i] = byte(r.Uint32())
	}
	return p
}()

// env is the state of one workload run on one Pair: the sessions, the
// workload's goroutines and the first error they hit.
type env struct {
	tb             testing.TB
	client, server Session
	cleanup        func()
	wg             sync.WaitGroup
	mu             sync.Mutex
	err            error
	closing        atomic.Bool
	closeOnce      sync.Once
	tornDown       chan struct{}
	teardownOnce   sync.Once
}

func newEnv(tb testing.TB, tr Transport) *env {
	tb.Helper()
	c, s, cleanup := tr.Pair(tb)
	return &env{tb: tb, client: c, server: s, cleanup: cleanup, tornDown: make(chan struct{})}
}

// teardown runs the transport's cleanup once; later callers wait for it.
func (e *env) teardown() {
	e.teardownOnce.Do(func() {
		e.closing.Store(true)
		e.cleanup()
		close(e.tornDown)
	})
	<-e.tornDown
}

// fail records err (the first one counts) and tears the pair down so that
// every goroutine blocked on it returns.
func (e *env) fail(err error) {
	if err == nil || e.closing.Load() {
		return
	}
	e.mu.Lock()
	if e.err == nil {
		e.err = err
	}
	e.mu.Unlock()
	go e.teardown()
}

// failed returns the first error recorded by fail.
func (e *env) failed() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.err
}

// check fails the benchmark with the first goroutine error, if any.
func (e *env) check() {
	e.tb.Helper()
	if err := e.failed(); err != nil {
		e.tb.Fatal(err)
	}
}

// spawn runs f in a goroutine of the workload; its error fails the run unless
// the pair is being torn down.
func (e *env) spawn(f func() error) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.fail(f())
	}()
}

// close tears the pair down, waits for the workload's goroutines and reports a
// goroutine error that check did not see. It is deferred right after newEnv.
func (e *env) close() {
	e.closeOnce.Do(func() {
		e.teardown()
		if !waitTimeout(&e.wg, 15*time.Second) {
			e.tb.Errorf("bench: workload goroutines still blocked 15 s after the pair was closed")
		}
		if err := e.failed(); err != nil && !e.tb.Failed() {
			e.tb.Error(err)
		}
	})
}

// fatalf fails the run from the benchmark goroutine.
func (e *env) fatalf(format string, args ...any) {
	e.tb.Helper()
	if err := e.failed(); err != nil {
		e.tb.Fatalf("%s (after: %v)", fmt.Sprintf(format, args...), err)
	}
	e.tb.Fatalf(format, args...)
}

// openPair opens one stream on the client and accepts it on the server.
func (e *env) openPair() (c, s Stream) {
	e.tb.Helper()
	cs, ss := e.openN(1)
	return cs[0], ss[0]
}

// openN opens n streams from the client, one after the other, while one
// goroutine accepts them on the server; the i-th accepted stream is paired with
// the i-th opened one (streams are accepted in the order they were opened).
func (e *env) openN(n int) (cs, ss []Stream) {
	e.tb.Helper()
	return e.openNInto(n, make([]Stream, 0, n), make([]Stream, 0, n))
}

// readN reads exactly n bytes from r into buf (reused).
func readN(r io.Reader, n int64, buf []byte) error {
	for n > 0 {
		p := buf
		if int64(len(p)) > n {
			p = p[:n]
		}
		m, err := r.Read(p)
		n -= int64(m)
		if err != nil {
			if n == 0 {
				return nil
			}
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// writeN writes n bytes of payload to w in chunks of chunk bytes.
func writeN(w io.Writer, n int64, chunk int) error {
	for n > 0 {
		c := int64(chunk)
		if c > n {
			c = n
		}
		if _, err := w.Write(payload[:c]); err != nil {
			return err
		}
		n -= c
	}
	return nil
}

// echo answers every size-byte message on s with the same bytes until s fails.
func echo(s Stream, size int) error {
	buf := make([]byte, size)
	for {
		if _, err := io.ReadFull(s, buf); err != nil {
			return err
		}
		if _, err := s.Write(buf); err != nil {
			return err
		}
	}
}

// roundTrip writes req on s and reads len(resp) bytes back.
func roundTrip(s Stream, req, resp []byte) error {
	if _, err := s.Write(req); err != nil {
		return err
	}
	_, err := io.ReadFull(s, resp)
	return err
}

// Bulk1 moves data over one stream in bulkChunk writes, client to server (c2s:
// the client masks on WebSocket transports) or server to client. The clock
// stops when the receiver has every byte. Besides MB/s it reports CPUPerMiB.
func Bulk1(b *testing.B, tr Transport, c2s bool) {
	b.ReportAllocs()
	e := newEnv(b, tr)
	defer e.close()
	cs, ss := e.openPair()
	w, r := cs, ss
	if !c2s {
		w, r = ss, cs
	}
	// One chunk untimed first, so that lazily built per-stream state is not
	// charged to a run with small b.N.
	total := int64(b.N+1) * bulkChunk
	received := make(chan error, 1)
	rbuf := make([]byte, bulkChunk)
	go func() {
		err := readN(r, total, rbuf)
		e.fail(err) // unblocks the writer
		received <- err
	}()
	if _, err := w.Write(payload[:bulkChunk]); err != nil {
		e.fatalf("write: %v", err)
	}
	b.SetBytes(bulkChunk)
	b.ResetTimer()
	cpu := startCPU()
	for range b.N {
		if _, err := w.Write(payload[:bulkChunk]); err != nil {
			e.teardown()
			<-received
			e.fatalf("write: %v", err)
		}
	}
	if err := <-received; err != nil {
		e.fatalf("read: %v", err)
	}
	b.StopTimer()
	cpu.report(b, int64(b.N)*bulkChunk)
}

// StreamsN opens n streams up front; each iteration every one of them sends
// streamsPayload bytes client to server from its own goroutine, and the
// iteration ends when every server stream has all of it. One untimed round
// warms up first. Besides MB/s it reports CPUPerMiB.
func StreamsN(b *testing.B, tr Transport, n int) {
	b.ReportAllocs()
	if tr.MaxStreams > 0 && tr.MaxStreams < n {
		b.Skipf("%s holds at most %d streams", tr.Name, tr.MaxStreams)
	}
	e := newEnv(b, tr)
	defer e.close()
	cs, ss := e.openN(n)

	// Persistent workers, started once per round through their channel, so
	// the iterations allocate nothing of their own.
	var round sync.WaitGroup
	starts := make([]chan struct{}, 0, 2*n)
	worker := func(start chan struct{}, f func() error) {
		e.spawn(func() error {
			for range start {
				err := f()
				round.Done()
				if err != nil {
					return err
				}
			}
			return nil
		})
	}
	for i := range n {
		w, r := cs[i], ss[i]
		buf := make([]byte, bulkChunk)
		ws, rs := make(chan struct{}, 1), make(chan struct{}, 1)
		starts = append(starts, ws, rs)
		worker(ws, func() error { return writeN(w, streamsPayload, bulkChunk) })
		worker(rs, func() error { return readN(r, streamsPayload, buf) })
	}
	defer func() {
		for _, c := range starts {
			close(c)
		}
	}()
	// runRound fails the benchmark (from this goroutine) if any worker failed.
	runRound := func() {
		round.Add(len(starts))
		for _, c := range starts {
			c <- struct{}{}
		}
		// A worker that fails tears the pair down, so the others return
		// too; the timeout only catches a transport that deadlocks.
		if !waitTimeout(&round, 2*time.Minute) {
			e.teardown()
			round.Wait()
			e.fatalf("a round of %d x %d bytes did not finish in 2 minutes", n, streamsPayload)
		}
		e.check()
	}
	runRound()
	b.SetBytes(int64(n) * streamsPayload)
	cpu := startCPU()
	for b.Loop() {
		runRound()
	}
	cpu.report(b, int64(b.N)*int64(n)*streamsPayload)
}

// Echo64 measures the round-trip time of an echoSize-byte request and
// response on one stream (ns/op is the RTT).
func Echo64(b *testing.B, tr Transport) {
	b.ReportAllocs()
	e := newEnv(b, tr)
	defer e.close()
	cs, ss := e.openPair()
	e.spawn(func() error { return echo(ss, echoSize) })
	req, resp := payload[:echoSize], make([]byte, echoSize)
	if err := roundTrip(cs, req, resp); err != nil { // warm-up
		e.fatalf("echo: %v", err)
	}
	for b.Loop() {
		if err := roundTrip(cs, req, resp); err != nil {
			e.fatalf("echo: %v", err)
		}
	}
}

// OpenClose measures one stream's life: open, a 1-byte echo, close on both
// sides (the server accepts, echoes and closes).
func OpenClose(b *testing.B, tr Transport) {
	b.ReportAllocs()
	e := newEnv(b, tr)
	defer e.close()
	e.spawn(func() error {
		var one [1]byte
		for {
			s, err := e.server.Accept()
			if err != nil {
				return err
			}
			if _, err := io.ReadFull(s, one[:]); err != nil {
				return fmt.Errorf("server read: %w", err)
			}
			if _, err := s.Write(one[:]); err != nil {
				return fmt.Errorf("server write: %w", err)
			}
			if err := s.Close(); err != nil {
				return fmt.Errorf("server close: %w", err)
			}
		}
	})
	req, resp := payload[:1], make([]byte, 1)
	cycle := func() {
		s, err := e.client.Open()
		if err != nil {
			e.fatalf("open: %v", err)
		}
		if err := roundTrip(s, req, resp); err != nil {
			e.fatalf("echo: %v", err)
		}
		if err := s.Close(); err != nil {
			e.fatalf("close: %v", err)
		}
	}
	cycle() // warm-up
	for b.Loop() {
		cycle()
	}
}

// Interactive measures echoSize-byte echo latency on one stream while another
// stream of the same pair sends bulk data client to server as fast as it can:
// head-of-line blocking. It reports the median and 99th percentile RTT and the
// bulk stream's throughput meanwhile.
func Interactive(b *testing.B, tr Transport) {
	b.ReportAllocs()
	e := newEnv(b, tr)
	defer e.close()
	cs, ss := e.openN(2)
	bulkC, bulkS, echoC, echoS := cs[0], ss[0], cs[1], ss[1]
	var drained atomic.Int64
	e.spawn(func() error {
		buf := make([]byte, bulkChunk)
		for {
			n, err := bulkS.Read(buf)
			drained.Add(int64(n))
			if err != nil {
				return err
			}
		}
	})
	e.spawn(func() error { return echo(echoS, echoSize) })
	// The same echo with the link idle first: the loaded percentiles are
	// judged against these.
	req, resp := payload[:echoSize], make([]byte, echoSize)
	idle := make([]time.Duration, idleEchoes)
	for i := range idle {
		t0 := time.Now()
		if err := roundTrip(echoC, req, resp); err != nil {
			e.fatalf("echo: %v", err)
		}
		idle[i] = time.Since(t0)
	}
	slices.Sort(idle)
	var stop atomic.Bool
	e.spawn(func() error {
		for !stop.Load() {
			if _, err := bulkC.Write(payload[:bulkChunk]); err != nil {
				return err
			}
		}
		return nil
	})
	defer stop.Store(true)
	// Let the bulk stream fill whatever buffers it can fill.
	for start := time.Now(); drained.Load() < 8<<20 && time.Since(start) < time.Second; {
		time.Sleep(time.Millisecond)
	}
	e.check()
	lat := make([]time.Duration, b.N)
	b.ResetTimer()
	start, before := time.Now(), drained.Load()
	for i := range b.N {
		t0 := time.Now()
		if err := roundTrip(echoC, req, resp); err != nil {
			e.fatalf("echo: %v", err)
		}
		lat[i] = time.Since(t0)
	}
	elapsed, moved := time.Since(start), drained.Load()-before
	b.StopTimer()
	stop.Store(true)
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50)), "p50-ns")
	b.ReportMetric(float64(percentile(lat, 99)), "p99-ns")
	b.ReportMetric(float64(moved)/1e6/elapsed.Seconds(), "bulk-MB/s")
	b.ReportMetric(float64(percentile(idle, 50)), "idle-p50-ns")
	b.ReportMetric(float64(percentile(idle, 99)), "idle-p99-ns")
}

// percentile returns the p-th percentile of sorted (nearest rank).
func percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i, 1)-1]
}

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
