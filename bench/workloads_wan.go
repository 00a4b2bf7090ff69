package bench

import (
	"runtime"
	rtmetrics "runtime/metrics"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// The WAN workloads: the throughput and echo workloads through the link
// emulator (link.go) at a long round trip and a bandwidth cap, every
// transport at its default settings. A flow-controlled stream cannot carry
// more than its window per round trip, so these show what each window (and
// its tuning) leaves of the link.
//
// Each run measures for a fixed time whatever b.N is (a round trip of 80 ms
// gives a b.N-driven loop too few samples to settle): wanWarmup first,
// untimed, for windows to grow, then wanMeasure.

// The links of the WAN workloads: 1 Gbit/s, 20 and 80 ms round trips.
var (
	wan20 = LinkConfig{Delay: 10 * time.Millisecond, Rate: 125_000_000}
	wan80 = LinkConfig{Delay: 40 * time.Millisecond, Rate: 125_000_000}
)

// Durations of one WAN run.
var (
	wanWarmup  = time.Second
	wanMeasure = 2 * time.Second
)

// wanMetrics are the columns of WANBulk1 and WANStreams8.
var wanMetrics = []string{"MB/s", "of-link", CPUPerMiB, "peak-inflight-B", "peak-heap-B"}

// wanWorkloads returns the WAN workloads of links, in table order.
func wanWorkloads(links ...LinkConfig) []Workload {
	var out []Workload
	for _, l := range links {
		l := l
		out = append(out,
			Workload{Name: "WANBulk1", Variant: l.String(), Primary: "MB/s", Metrics: wanMetrics, Runs: 1,
				Fn: func(b *testing.B, tr Transport) { WANStreams(b, tr, l, 1) }},
			Workload{Name: "WANStreams8", Variant: l.String(), Primary: "MB/s", Metrics: wanMetrics, Runs: 1, CeilingNote: perStream,
				Fn: func(b *testing.B, tr Transport) { WANStreams(b, tr, l, 8) }},
			Workload{Name: "WANInteractive", Variant: l.String(), Primary: "p99-ns", Runs: 1,
				Metrics: []string{"p50-ns", "p99-ns", "echoes", "bulk-MB/s", "idle-p50-ns"},
				Fn:      func(b *testing.B, tr Transport) { WANInteractive(b, tr, l) }})
	}
	return out
}

// heapSampler records the peak of the live heap (objects, including
// garbage not yet collected) above its level when it started.
type heapSampler struct {
	stop chan struct{}
	done chan struct{}
	base uint64
	peak atomic.Uint64
}

const heapObjects = "/memory/classes/heap/objects:bytes"

func readHeap(s []rtmetrics.Sample) uint64 {
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

func startHeapSampler() *heapSampler {
	runtime.GC()
	s := []rtmetrics.Sample{{Name: heapObjects}}
	h := &heapSampler{stop: make(chan struct{}), done: make(chan struct{}), base: readHeap(s)}
	go func() {
		defer close(h.done)
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for {
			if v := readHeap(s); v > h.base && v-h.base > h.peak.Load() {
				h.peak.Store(v - h.base)
			}
			select {
			case <-t.C:
			case <-h.stop:
				return
			}
		}
	}()
	return h
}

func (h *heapSampler) finish() uint64 {
	close(h.stop)
	<-h.done
	return h.peak.Load()
}

// WANStreams sends as fast as it can on n streams client to server through
// link, and reports MB/s over wanMeasure after wanWarmup, its share of the
// link's rate (of-link), CPU per MiB, the peak of the bytes written and not
// yet read (peak-inflight-B: everything the path holds, from the sender's
// queue through the link to the receiver's buffer; a window bounds it) and
// the peak growth of the heap while it ran (peak-heap-B: the link's own
// buffers are allocated before, so this is the transports' and the
// workload's).
func WANStreams(b *testing.B, tr Transport, link LinkConfig, n int) {
	if tr.MaxStreams > 0 && tr.MaxStreams < n {
		b.Skipf("%s holds at most %d streams", tr.Name, tr.MaxStreams)
	}
	e := newEnvOver(b, tr, Net{Link: &link})
	defer e.close()
	cs, ss := e.openN(n)
	heap := startHeapSampler()
	var written, read, peak atomic.Int64
	var stop atomic.Bool
	for i := range n {
		w, r := cs[i], ss[i]
		e.spawn(func() error {
			for !stop.Load() {
				m, err := w.Write(payload[:bulkChunk])
				written.Add(int64(m))
				if err != nil {
					return err
				}
			}
			return nil
		})
		e.spawn(func() error {
			buf := make([]byte, bulkChunk)
			for {
				m, err := r.Read(buf)
				got := read.Add(int64(m))
				if in := written.Load() - got; in > peak.Load() {
					peak.Store(in) // racy max: a sample, good enough
				}
				if err != nil {
					return err
				}
			}
		})
	}
	time.Sleep(wanWarmup)
	e.check()
	b.ResetTimer()
	cpu := startCPU()
	start, before := time.Now(), read.Load()
	time.Sleep(wanMeasure)
	moved, elapsed := read.Load()-before, time.Since(start)
	b.StopTimer()
	cpu.report(b, moved)
	stop.Store(true)
	e.check()
	mbps := float64(moved) / 1e6 / elapsed.Seconds()
	b.ReportMetric(mbps, "MB/s")
	b.ReportMetric(mbps*1e6/float64(link.Rate), "of-link")
	b.ReportMetric(float64(peak.Load()), "peak-inflight-B")
	b.ReportMetric(float64(heap.finish()), "peak-heap-B")
}

// WANInteractive is Interactive through link: an echoSize-byte echo on one
// stream, one after the other for wanMeasure, while another stream sends
// bulk data client to server (the kubectl exec typing-while-cp case). It
// reports the echo's median and 99th percentile, how many echoes that is,
// the bulk stream's MB/s and the median echo before the bulk started.
func WANInteractive(b *testing.B, tr Transport, link LinkConfig) {
	e := newEnvOver(b, tr, Net{Link: &link})
	defer e.close()
	bulkC, echoC, drained := e.interactivePair()
	req, resp := payload[:echoSize], make([]byte, echoSize)
	var idle []time.Duration
	for range 5 {
		t0 := time.Now()
		if err := roundTrip(echoC, req, resp); err != nil {
			e.fatalf("echo: %v", err)
		}
		idle = append(idle, time.Since(t0))
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
	time.Sleep(wanWarmup)
	e.check()
	b.ResetTimer()
	var lat []time.Duration
	start, before := time.Now(), drained.Load()
	for time.Since(start) < wanMeasure {
		t0 := time.Now()
		if err := roundTrip(echoC, req, resp); err != nil {
			e.fatalf("echo: %v", err)
		}
		lat = append(lat, time.Since(t0))
	}
	elapsed, moved := time.Since(start), drained.Load()-before
	b.StopTimer()
	stop.Store(true)
	slices.Sort(lat)
	b.ReportMetric(float64(percentile(lat, 50)), "p50-ns")
	b.ReportMetric(float64(percentile(lat, 99)), "p99-ns")
	b.ReportMetric(float64(len(lat)), "echoes")
	b.ReportMetric(float64(moved)/1e6/elapsed.Seconds(), "bulk-MB/s")
	b.ReportMetric(float64(percentile(idle, 50)), "idle-p50-ns")
}
