package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Options selects what Run measures.
type Options struct {
	// Workloads are workload names ("Bulk1", "Echo64") or full names
	// ("Bulk1/dir=c2s"); empty means every workload.
	Workloads []string
	// Transports are transport names; empty means every registered one.
	Transports []string
	// Count is how many times each benchmark runs (default 1); the tables
	// show the median.
	Count int
	// Benchtime is what `go test -benchtime` takes: "1s" (the default),
	// "500ms", "100x".
	Benchtime string
	// SkipHeavy leaves out the workloads marked Heavy (Streams1024,
	// IdleStreams) unless they are named in Workloads.
	SkipHeavy bool
}

// Result is one figure of one run of one workload on one transport.
type Result struct {
	Workload  string  `json:"workload"`  // Workload.FullName(): "Bulk1/dir=c2s", "Echo64"
	Transport string  `json:"transport"` // Transport.Name
	Metric    string  `json:"metric"`    // the name `go test -bench` prints: "ns/op", "MB/s", "cpu-ms/MiB", "p99-ns", "B/stream"
	Value     float64 `json:"value"`     // in Unit
	Unit      string  `json:"unit"`      // "ns", "MB/s", "ms/MiB", "B", "allocs", "streams", "goroutines", "bool" (1 or 0)
	// HigherIsBetter tells the direction for ratios and for picking the
	// best peer.
	HigherIsBetter bool `json:"higher_is_better"`
	Run            int  `json:"run"` // 0 .. Count-1
}

type metricInfo struct {
	unit   string
	higher bool
}

// metrics describes every metric the workloads report.
var metrics = map[string]metricInfo{
	"ns/op":             {"ns", false},
	"MB/s":              {"MB/s", true},
	"B/op":              {"B", false},
	"allocs/op":         {"allocs", false},
	"p50-ns":            {"ns", false},
	"p99-ns":            {"ns", false},
	"bulk-MB/s":         {"MB/s", true},
	"idle-p50-ns":       {"ns", false},
	"idle-p99-ns":       {"ns", false},
	"B/stream":          {"B", false},
	"goroutines/stream": {"goroutines", false},
	"streams":           {"streams", true},
	"accepted-B":        {"B", false},
	"heap-B":            {"B", false},
	"other-stream-ok":   {"bool", true},
	"close-ok":          {"bool", true},
	"unbounded":         {"bool", false},
	CPUPerMiB:           {"ms/MiB", false},
	"of-link":           {"ratio", true},
	"peak-inflight-B":   {"B", false},
	"peak-heap-B":       {"B", false},
	"echoes":            {"echoes", true},
}

func newResult(workload, transport, metric string, v float64, run int) Result {
	info, ok := metrics[metric]
	if !ok {
		info = metricInfo{unit: metric}
	}
	return Result{Workload: workload, Transport: transport, Metric: metric, Value: v, Unit: info.unit, HigherIsBetter: info.higher, Run: run}
}

// selectWorkloads returns the workloads matching names (all if empty).
func selectWorkloads(names []string) ([]Workload, error) {
	all := Workloads()
	if len(names) == 0 {
		return all, nil
	}
	var out []Workload
	for _, n := range names {
		found := false
		for _, w := range all {
			if (w.Name == n || w.FullName() == n) && !slices.ContainsFunc(out, func(o Workload) bool { return o.FullName() == w.FullName() }) {
				out = append(out, w)
				found = true
			}
		}
		if !found && !slices.ContainsFunc(out, func(o Workload) bool { return o.Name == n || o.FullName() == n }) {
			return nil, fmt.Errorf("bench: no workload %q", n)
		}
	}
	return out, nil
}

// selectTransports returns the transports named (all registered if empty).
func selectTransports(names []string) ([]Transport, error) {
	if len(names) == 0 {
		return All(), nil
	}
	var out []Transport
	for _, n := range names {
		t, ok := Lookup(n)
		if !ok {
			return nil, fmt.Errorf("bench: no transport %q", n)
		}
		out = append(out, t)
	}
	return out, nil
}

var runMu sync.Mutex

// Run measures the selected workloads on the selected transports with
// testing.Benchmark, the same functions `go test -bench` runs, and returns
// every figure. progress, if not nil, gets one line per finished benchmark.
// A workload that fails or skips on a transport is reported through progress
// and leaves no results; Run goes on with the next. Run checks ctx between
// benchmarks. Runs are serialised (testing.Benchmark reads a process-wide
// -test.benchtime).
func Run(ctx context.Context, opts Options, progress func(string)) ([]Result, error) {
	ws, err := selectWorkloads(opts.Workloads)
	if err != nil {
		return nil, err
	}
	if opts.SkipHeavy && len(opts.Workloads) == 0 {
		ws = slices.DeleteFunc(ws, func(w Workload) bool { return w.Heavy })
	}
	ts, err := selectTransports(opts.Transports)
	if err != nil {
		return nil, err
	}
	if progress == nil {
		progress = func(string) {}
	}
	count := max(opts.Count, 1)

	runMu.Lock()
	defer runMu.Unlock()
	restore, err := setBenchtime(opts.Benchtime)
	if err != nil {
		return nil, err
	}
	defer restore()

	var results []Result
	for run := range count {
		for _, w := range ws {
			if w.Runs > 0 && run >= w.Runs {
				continue
			}
			for _, tr := range ts {
				if err := ctx.Err(); err != nil {
					return results, err
				}
				if !tr.runs(w) {
					continue
				}
				name := fmt.Sprintf("%s transport=%s", w.FullName(), tr.Name)
				rs, msg := runOne(w, tr, run)
				if msg != "" {
					progress(name + ": " + msg)
					continue
				}
				results = append(results, rs...)
				progress(name + ": " + summaryLine(w, rs))
			}
		}
	}
	return results, nil
}

// runOne runs one benchmark; msg says why there are no results.
func runOne(w Workload, tr Transport, run int) (rs []Result, msg string) {
	var b *testing.B
	res := testing.Benchmark(func(tb *testing.B) {
		b = tb
		w.Fn(tb, tr)
	})
	switch {
	case b != nil && b.Skipped():
		return nil, "skipped"
	case b == nil || b.Failed() || res.N == 0:
		return nil, "failed (run it with go test -bench to see why)"
	}
	add := func(metric string, v float64) {
		rs = append(rs, newResult(w.FullName(), tr.Name, metric, v, run))
	}
	add("ns/op", float64(res.T.Nanoseconds())/float64(res.N))
	if res.Bytes > 0 && res.T > 0 {
		add("MB/s", float64(res.Bytes)*float64(res.N)/1e6/res.T.Seconds())
	}
	add("B/op", float64(res.AllocedBytesPerOp()))
	add("allocs/op", float64(res.AllocsPerOp()))
	keys := make([]string, 0, len(res.Extra))
	for k := range res.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		add(k, res.Extra[k])
	}
	return rs, ""
}

func summaryLine(w Workload, rs []Result) string {
	var parts []string
	for _, m := range w.Metrics {
		for _, r := range rs {
			if r.Metric == m {
				parts = append(parts, formatValue(r.Value)+" "+m)
			}
		}
	}
	return strings.Join(parts, ", ")
}

// setBenchtime sets -test.benchtime for testing.Benchmark and returns a
// function restoring the previous value.
func setBenchtime(v string) (restore func(), err error) {
	if v == "" {
		v = "1s"
	}
	testing.Init() // registers the test.* flags; no-op in a test binary
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return nil, errors.New("bench: testing did not register -test.benchtime")
	}
	old := f.Value.String()
	if err := f.Value.Set(v); err != nil {
		return nil, fmt.Errorf("bench: benchtime %q: %w", v, err)
	}
	return func() { f.Value.Set(old) }, nil
}

// ParseGoBench reads `go test -bench` output (as produced by the benchmarks
// of this package) and returns its figures; repeated lines (-count) become
// successive runs. Lines that are not results of this package's benchmarks are
// ignored.
func ParseGoBench(r io.Reader) ([]Result, error) {
	var out []Result
	runs := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 || !strings.HasPrefix(fields[0], "Benchmark") {
			continue
		}
		if _, err := strconv.Atoi(fields[1]); err != nil {
			continue
		}
		workload, transport, ok := splitBenchName(fields[0])
		if !ok {
			continue
		}
		key := workload + "\x00" + transport
		run := runs[key]
		runs[key]++
		for i := 2; i+1 < len(fields); i += 2 {
			v, err := strconv.ParseFloat(fields[i], 64)
			if err != nil {
				continue
			}
			out = append(out, newResult(workload, transport, fields[i+1], v, run))
		}
	}
	return out, sc.Err()
}

// splitBenchName turns "BenchmarkBulk1/transport=ws/dir=c2s-2" into
// ("Bulk1/dir=c2s", "ws").
func splitBenchName(name string) (workload, transport string, ok bool) {
	name = strings.TrimPrefix(name, "Benchmark")
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	parts := strings.Split(name, "/")
	var rest []string
	for _, p := range parts {
		if t, found := strings.CutPrefix(p, "transport="); found {
			transport = t
			continue
		}
		rest = append(rest, p)
	}
	if transport == "" || len(rest) == 0 {
		return "", "", false
	}
	return strings.Join(rest, "/"), transport, true
}
