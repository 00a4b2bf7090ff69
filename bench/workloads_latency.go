package bench

import (
	"fmt"
	"io"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The latency workloads: an echo's round trip (Echo64), a stream's whole
// life (OpenClose) and the echo behind a bulk stream (Interactive).

// Echo64 measures the round-trip time of an echoSize-byte request and
// response on one stream (ns/op is the RTT).
func Echo64(b *testing.B, tr Transport) { Echo64Over(b, tr, Net{}) }

// Echo64Over is Echo64 over n (TLS).
func Echo64Over(b *testing.B, tr Transport, n Net) {
	b.ReportAllocs()
	e := newEnvOver(b, tr, n)
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

// interactivePair opens the two streams of Interactive and WANInteractive:
// the server drains the first (bulk; drained counts what it read) and
// echoes echoSize-byte messages on the second.
func (e *env) interactivePair() (bulkC, echoC Stream, drained *atomic.Int64) {
	cs, ss := e.openN(2)
	bulkS, echoS := ss[0], ss[1]
	drained = new(atomic.Int64)
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
	return cs[0], cs[1], drained
}

// Interactive measures echoSize-byte echo latency on one stream while another
// stream of the same pair sends bulk data client to server as fast as it can:
// head-of-line blocking. It reports the median and 99th percentile RTT and the
// bulk stream's throughput meanwhile.
func Interactive(b *testing.B, tr Transport) {
	b.ReportAllocs()
	e := newEnv(b, tr)
	defer e.close()
	bulkC, echoC, drained := e.interactivePair()
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
