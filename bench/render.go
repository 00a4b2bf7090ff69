package bench

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The tables of a run: results grouped per workload, medians, ratios to
// wsmux and to the ceiling, and their plain-text and Markdown renderings.

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
	ceilNote   string
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
		tb := table{workload: w.FullName(), primary: w.Primary, higher: metrics[w.Primary].higher, ceiling: ceiling, ceilNote: w.CeilingNote, cells: map[string]map[string]cell{}}
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
	if tb.ceilNote != "" {
		s += " (" + tb.ceilNote + ")"
	}
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
