package bench

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
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
			for _, tr := range ts {
				if err := ctx.Err(); err != nil {
					return results, err
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

// RenderOptions chooses the columns of the tables.
type RenderOptions struct {
	// Reference is the transport every figure is compared with; empty means
	// "wsmux" if it has results, else the best non-ceiling transport of
	// each workload (on its primary metric).
	Reference string
	// Ceiling is the ceiling transport compared with; empty means "ws".
	Ceiling string
}

// cell is the median of one metric of one transport in one workload.
type cell struct {
	v  float64
	ok bool
}

// table is one workload's figures, medians over runs.
type table struct {
	workload   string
	primary    string
	higher     bool
	metrics    []string
	transports []string
	cells      map[string]map[string]cell // transport -> metric -> median
	reference  string
	refNote    string
	ceiling    string
}

// tables groups results into one table per workload, in workload order, then
// any unknown workloads by name.
func tables(results []Result, ro RenderOptions) []table {
	ceiling := ro.Ceiling
	if ceiling == "" {
		ceiling = "ws"
	}
	type key struct{ w, t, m string }
	samples := map[key][]float64{}
	workloads := map[string]bool{}
	transports := map[string]bool{}
	for _, r := range results {
		samples[key{r.Workload, r.Transport, r.Metric}] = append(samples[key{r.Workload, r.Transport, r.Metric}], r.Value)
		workloads[r.Workload] = true
		transports[r.Transport] = true
	}
	ceilings := map[string]bool{}
	for _, t := range All() {
		if t.Ceiling {
			ceilings[t.Name] = true
		}
	}
	// Transport order: registered order, then unknown names sorted.
	var torder []string
	for _, t := range All() {
		if transports[t.Name] {
			torder = append(torder, t.Name)
			delete(transports, t.Name)
		}
	}
	var extra []string
	for t := range transports {
		extra = append(extra, t)
	}
	slices.Sort(extra)
	torder = append(torder, extra...)

	// Workload order: Workloads(), then unknown ones sorted.
	var wls []Workload
	for _, w := range Workloads() {
		if workloads[w.FullName()] {
			wls = append(wls, w)
			delete(workloads, w.FullName())
		}
	}
	var extraW []string
	for w := range workloads {
		extraW = append(extraW, w)
	}
	slices.Sort(extraW)
	for _, name := range extraW {
		wls = append(wls, Workload{Name: name, Primary: "ns/op", Metrics: standardMetrics})
	}

	var out []table
	for _, w := range wls {
		tb := table{workload: w.FullName(), primary: w.Primary, higher: metrics[w.Primary].higher, ceiling: ceiling, cells: map[string]map[string]cell{}}
		for _, m := range w.Metrics {
			for _, t := range torder {
				if len(samples[key{tb.workload, t, m}]) > 0 {
					tb.metrics = append(tb.metrics, m)
					break
				}
			}
		}
		for _, t := range torder {
			row := map[string]cell{}
			for _, m := range tb.metrics {
				if s := samples[key{tb.workload, t, m}]; len(s) > 0 {
					row[m] = cell{median(s), true}
				}
			}
			if len(row) > 0 {
				tb.transports = append(tb.transports, t)
				tb.cells[t] = row
			}
		}
		tb.reference, tb.refNote = pickReference(tb, ro.Reference, ceilings)
		out = append(out, tb)
	}
	return out
}

func pickReference(tb table, want string, ceilings map[string]bool) (string, string) {
	has := func(t string) bool { return tb.cells[t][tb.primary].ok }
	if want != "" {
		if has(want) {
			return want, ""
		}
		return "", ""
	}
	if has("wsmux") {
		return "wsmux", ""
	}
	best, bestV := "", 0.0
	for _, t := range tb.transports {
		c := tb.cells[t][tb.primary]
		if ceilings[t] || !c.ok {
			continue
		}
		if best == "" || (tb.higher && c.v > bestV) || (!tb.higher && c.v < bestV) {
			best, bestV = t, c.v
		}
	}
	if best == "" {
		return "", ""
	}
	return best, "best peer"
}

func median(s []float64) float64 {
	s = slices.Clone(s)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// formatValue prints a figure with about four significant digits.
func formatValue(v float64) string {
	a := math.Abs(v)
	switch {
	case v == math.Trunc(v) && a < 1e9:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 1000:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// ratio formats v/base as "1.23x" (or "-" when undefined).
func ratio(v, base cell) string {
	if !v.ok || !base.ok || base.v == 0 {
		return "-"
	}
	r := v.v / base.v
	switch {
	case r >= 100:
		return strconv.FormatFloat(r, 'f', 0, 64) + "x"
	case r >= 10:
		return strconv.FormatFloat(r, 'f', 1, 64) + "x"
	}
	return strconv.FormatFloat(r, 'f', 2, 64) + "x"
}

// compared reports whether metric m gets ratio columns: the primary metric
// and, beside it, CPUPerMiB.
func (tb table) compared(m string) bool { return m == tb.primary || m == CPUPerMiB }

// columns lists the metrics in column order: the primary, CPUPerMiB if the
// table has it, then the others as the workload lists them.
func (tb table) columns() []string {
	cols := []string{tb.primary}
	if tb.primary != CPUPerMiB && slices.Contains(tb.metrics, CPUPerMiB) {
		cols = append(cols, CPUPerMiB)
	}
	for _, m := range tb.metrics {
		if !slices.Contains(cols, m) {
			cols = append(cols, m)
		}
	}
	return cols
}

// header names the columns: the transport, then each metric, a compared
// metric followed by its ratios to the reference and the ceiling ("vs
// wsmux", "vs ws"; "cpu vs wsmux", "cpu vs ws" for CPUPerMiB).
func (tb table) header() []string {
	h := []string{"transport"}
	for _, m := range tb.columns() {
		h = append(h, m)
		if !tb.compared(m) {
			continue
		}
		prefix := "vs "
		if m != tb.primary {
			prefix = "cpu vs "
		}
		if tb.reference != "" {
			h = append(h, prefix+tb.reference)
		}
		h = append(h, prefix+tb.ceiling)
	}
	return h
}

func (tb table) row(t string) []string {
	c := tb.cells[t]
	r := []string{t}
	for _, m := range tb.columns() {
		r = append(r, fmtCell(c[m]))
		if !tb.compared(m) {
			continue
		}
		if tb.reference != "" {
			r = append(r, ratio(c[m], tb.cells[tb.reference][m]))
		}
		r = append(r, ratio(c[m], tb.cells[tb.ceiling][m]))
	}
	return r
}

func fmtCell(c cell) string {
	if !c.ok {
		return "-"
	}
	return formatValue(c.v)
}

func (tb table) title() string {
	dir := "lower is better"
	if tb.higher {
		dir = "higher is better"
	}
	s := fmt.Sprintf("%s: %s (%s)", tb.workload, tb.primary, dir)
	if tb.reference != "" {
		s += "; reference " + tb.reference
		if tb.refNote != "" {
			s += " (" + tb.refNote + ")"
		}
	}
	s += "; ceiling " + tb.ceiling
	if tb.primary != CPUPerMiB && slices.Contains(tb.metrics, CPUPerMiB) {
		s += "; " + CPUPerMiB + ": process CPU, both ends (lower is better)"
	}
	return s
}

// RenderText writes one plain-text table per workload: each transport's
// figures (medians over runs), its primary figure's ratio to the reference
// transport and to the ceiling, then CPUPerMiB with its ratios (throughput
// workloads), then the other metrics.
func RenderText(w io.Writer, results []Result, ro RenderOptions) error {
	var sb strings.Builder
	for i, tb := range tables(results, ro) {
		if i > 0 {
			sb.WriteByte('\n')
		}
		sb.WriteString(tb.title() + "\n")
		rows := [][]string{tb.header()}
		for _, t := range tb.transports {
			rows = append(rows, tb.row(t))
		}
		widths := make([]int, len(rows[0]))
		for _, r := range rows {
			for j, c := range r {
				widths[j] = max(widths[j], len(c))
			}
		}
		for _, r := range rows {
			for j, c := range r {
				pad := strings.Repeat(" ", widths[j]-len(c))
				switch {
				case j == 0:
					sb.WriteString(c + pad)
				default:
					sb.WriteString("  " + pad + c)
				}
			}
			sb.WriteByte('\n')
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// RenderMarkdown writes the same tables as RenderText in Markdown.
func RenderMarkdown(w io.Writer, results []Result, ro RenderOptions) error {
	var sb strings.Builder
	for i, tb := range tables(results, ro) {
		if i > 0 {
			sb.WriteByte('\n')
		}
		fmt.Fprintf(&sb, "**%s**\n\n", tb.title())
		h := tb.header()
		sb.WriteString("| " + strings.Join(h, " | ") + " |\n")
		sep := make([]string, len(h))
		sep[0] = "---"
		for j := 1; j < len(h); j++ {
			sep[j] = "---:"
		}
		sb.WriteString("|" + strings.Join(sep, "|") + "|\n")
		for _, t := range tb.transports {
			sb.WriteString("| " + strings.Join(tb.row(t), " | ") + " |\n")
		}
	}
	_, err := io.WriteString(w, sb.String())
	return err
}
