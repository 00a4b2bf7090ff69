package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
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
	// CeilingNote says, in the tables' titles, how the ceilings run the
	// workload where that differs from the multiplexers.
	CeilingNote string
	// Runs, when positive, caps how many of Options.Count runs measure
	// it: the WAN workloads take seconds each whatever the benchtime.
	Runs int
	Fn   func(b *testing.B, tr Transport)
}

// FullName is the workload's name in results and tables: Name, or
// Name/Variant.
func (w Workload) FullName() string {
	if w.Variant == "" {
		return w.Name
	}
	return w.Name + "/" + w.Variant
}

// perStream is the CeilingNote of StreamsN: tcp and ws have no streams, so
// they open a connection for each, while a multiplexer carries them all
// over one.
const perStream = "one connection per stream"

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
	return append([]Workload{
		{Name: "Bulk1", Variant: "dir=c2s", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { Bulk1(b, tr, true) }},
		{Name: "Bulk1", Variant: "dir=s2c", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { Bulk1(b, tr, false) }},
		{Name: "Bulk1Read", Variant: "read=4KiB", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { BulkWith(b, tr, BulkOptions{C2S: true, ReadSize: 4 << 10}) }},
		{Name: "Bulk1Read", Variant: "read=8KiB", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { BulkWith(b, tr, BulkOptions{C2S: true, ReadSize: 8 << 10}) }},
		{Name: "Bulk1Read", Variant: "read=32KiB", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { BulkWith(b, tr, BulkOptions{C2S: true, ReadSize: 32 << 10}) }},
		{Name: "Bulk1Read", Variant: "read=io.Copy", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { BulkWith(b, tr, BulkOptions{C2S: true, Copy: true}) }},
		{Name: "Streams8", Primary: "MB/s", Metrics: throughputMetrics, CeilingNote: perStream,
			Fn: func(b *testing.B, tr Transport) { StreamsN(b, tr, 8) }},
		{Name: "Streams64", Primary: "MB/s", Metrics: throughputMetrics, CeilingNote: perStream,
			Fn: func(b *testing.B, tr Transport) { StreamsN(b, tr, 64) }},
		{Name: "Streams1024", Primary: "MB/s", Metrics: throughputMetrics, CeilingNote: perStream, Heavy: true,
			Fn: func(b *testing.B, tr Transport) { StreamsN(b, tr, 1024) }},
		{Name: "Echo64", Primary: "ns/op", Metrics: standardMetrics, Fn: Echo64},
		{Name: "TLSBulk1", Variant: "dir=c2s", Primary: "MB/s", Metrics: throughputMetrics,
			Fn: func(b *testing.B, tr Transport) { BulkWith(b, tr, BulkOptions{C2S: true, Net: Net{TLS: true}}) }},
		{Name: "TLSStreams64", Primary: "MB/s", Metrics: throughputMetrics, CeilingNote: perStream,
			Fn: func(b *testing.B, tr Transport) { StreamsNOver(b, tr, 64, Net{TLS: true}) }},
		{Name: "TLSEcho64", Primary: "ns/op", Metrics: standardMetrics,
			Fn: func(b *testing.B, tr Transport) { Echo64Over(b, tr, Net{TLS: true}) }},
		{Name: "OpenClose", Primary: "ns/op", Metrics: standardMetrics, Fn: OpenClose},
		{Name: "Interactive", Primary: "p99-ns", Metrics: []string{"p50-ns", "p99-ns", "bulk-MB/s", "idle-p50-ns", "idle-p99-ns", "B/op", "allocs/op"}, Fn: Interactive},
		{Name: "IdleStreams", Primary: "B/stream", Metrics: []string{"B/stream", "goroutines/stream", "streams"}, Heavy: true, Fn: IdleStreams},
		{Name: "NeverRead", Primary: "accepted-B", Metrics: []string{"accepted-B", "heap-B", "other-stream-ok", "close-ok", "unbounded"}, Fn: NeverRead},
	}, wanWorkloads(wan20, wan80)...)
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
	return newEnvOver(tb, tr, Net{})
}

// newEnvOver is newEnv over n (TLS, an emulated link).
func newEnvOver(tb testing.TB, tr Transport, n Net) *env {
	tb.Helper()
	c, s, cleanup := tr.Pair(tb, n)
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
