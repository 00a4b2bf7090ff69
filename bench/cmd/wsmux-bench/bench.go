package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/wsmux/wsmux/bench"
)

const benchLong = `Runs the side-by-side benchmark suite of package bench in this process: the
same workloads over every transport (the tcp and raw ws ceilings, Kubernetes'
SPDY with and without a WebSocket tunnel, yamux, smux, wsmux and wsmux through
its Kubernetes httpstream adapter), client and server over 127.0.0.1.

It names the machine (CPU model, CPUs, Go version), then prints one table per
workload: each transport's figure (the median over --count runs), its ratio
to wsmux and to the ws ceiling, and the other metrics. Throughput workloads
add cpu-ms/MiB beside MB/s: the process's CPU time (user+sys, client and
server together) per MiB moved, with its ratios to wsmux and to ws; it varies
far less than MB/s between busy or different machines. A progress line per
finished benchmark goes to standard error. With --out, the same tables are
written to DIR/bench.md with an SVG bar chart (DIR/bench.svg) and the machine
and every figure to DIR/results.json.

The machine matters: compare ratios within one run, not figures across runs.
Flags also work with one dash (-count 3), as in earlier releases.`

const benchExample = `  wsmux-bench bench --quick
  wsmux-bench bench --count 3 --out ../docs/bench
  wsmux-bench bench --workloads Bulk1,Streams64 --transports ws,yamux,wsmux --benchtime 2s`

// benchFlags are the options of `wsmux-bench bench`.
type benchFlags struct {
	quick      bool
	out        string
	transports string
	workloads  string
	benchtime  string
	count      int
	idle       int // --idle-sessions: idle's run instead (benchidle.go)
}

// quickBenchtime is --benchtime under --quick: every heavy workload runs
// once, the others about this long.
const quickBenchtime = "300ms"

func newBenchCmd() *cobra.Command { return newBenchCmdFor(&benchFlags{}) }

// newBenchCmdFor is `wsmux-bench bench` parsing its flags into f.
func newBenchCmdFor(f *benchFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "bench [flags]",
		Short:   "Compare wsmux with SPDY, yamux, smux and the raw TCP/WebSocket ceilings",
		Long:    benchLong,
		Example: benchExample,
		// Flags are parsed by parseBenchArgs, which also takes the one-dash
		// spelling (-count 3) that scripts written for earlier releases use.
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			help, err := parseBenchArgs(cmd, f, args)
			if err != nil {
				return err
			}
			if help {
				return cmd.Help()
			}
			if f.idle > 0 {
				return runBenchIdle(cmd, idleOpts{sessions: f.idle, duration: time.Minute, driver: "eventloop"})
			}
			return runBench(cmd.Context(), f, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fs := cmd.Flags()
	fs.BoolVar(&f.quick, "quick", false, "shorter runs (--benchtime "+quickBenchtime+"; Streams1024 and IdleStreams once)")
	fs.StringVar(&f.out, "out", "", "write bench.md, bench.svg and results.json into this `directory`")
	fs.StringVar(&f.transports, "transports", "", "comma-separated `transports` (default all: "+strings.Join(transportNames(), ",")+")")
	fs.StringVar(&f.workloads, "workloads", "", "comma-separated `workloads`, e.g. Bulk1,Echo64 or Bulk1/dir=c2s (default all)")
	fs.StringVar(&f.benchtime, "benchtime", "", "go test -benchtime per benchmark: 1s, 500ms, 100x (default 1s, "+quickBenchtime+" with --quick)")
	fs.IntVar(&f.count, "count", 1, "runs of every benchmark; the tables show the median")
	fs.IntVar(&f.idle, "idle-sessions", 0, "instead: hold this many idle sessions, clients in a second process, and report the server's memory per session (as wsmux-bench idle --sessions N)")
	return cmd
}

// parseBenchArgs parses args into f with the command's flags (its own, the
// inherited --log-level and --help) and reports whether help was asked for.
// Errors are usage errors.
func parseBenchArgs(cmd *cobra.Command, f *benchFlags, args []string) (help bool, err error) {
	_ = cmd.InheritedFlags() // merges the parents' persistent flags into cmd.Flags()
	fs := cmd.Flags()
	if err := fs.Parse(doubleDash(fs, args)); err != nil {
		return false, usageErrorf("%v", err)
	}
	if h, _ := fs.GetBool("help"); h {
		return true, nil
	}
	if lf := fs.Lookup("log-level"); lf != nil && lf.Changed {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(lf.Value.String())); err != nil {
			return false, usageErrorf("--log-level %q: want debug, info, warn or error", lf.Value.String())
		}
	}
	if fs.NArg() > 0 {
		return false, usageErrorf("bench: unexpected argument %q", fs.Arg(0))
	}
	if f.count < 1 {
		return false, usageErrorf("bench: --count must be at least 1")
	}
	return false, nil
}

// doubleDash rewrites the one-dash spelling of fs's long flags ("-count",
// "-out=DIR") to two dashes, leaving flag values, shorthands ("-h"), unknown
// names (for pflag to reject) and everything after "--" alone.
func doubleDash(fs *pflag.FlagSet, args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, hasValue := "", false
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, hasValue = strings.Cut(a[2:], "=")
		case strings.HasPrefix(a, "-") && len(a) > 2:
			name, _, hasValue = strings.Cut(a[1:], "=")
			if len(name) > 1 && fs.Lookup(name) != nil {
				a = "-" + a
			}
		}
		out = append(out, a)
		// A flag that takes a value consumes the next argument.
		if fl := fs.Lookup(name); fl != nil && len(name) > 1 && !hasValue && fl.NoOptDefVal == "" && i+1 < len(args) {
			i++
			out = append(out, args[i])
		}
	}
	return out
}

func transportNames() []string {
	var names []string
	for _, t := range bench.All() {
		names = append(names, t.Name)
	}
	return names
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func runBench(ctx context.Context, f *benchFlags, stdout, stderr io.Writer) error {
	if ctx == nil {
		ctx = context.Background()
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	opts := bench.Options{
		Workloads:  splitList(f.workloads),
		Transports: splitList(f.transports),
		Count:      f.count,
		Benchtime:  f.benchtime,
	}
	if opts.Benchtime == "" && f.quick {
		opts.Benchtime = quickBenchtime
	}
	total, err := plannedRuns(opts)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if f.out != "" {
		if err := os.MkdirAll(f.out, 0o755); err != nil {
			return err
		}
	}

	machine := bench.ThisMachine()
	start := time.Now()
	done := 0
	progress := func(line string) {
		done++
		el := time.Since(start)
		eta := ""
		if done < total {
			left := time.Duration(float64(el) / float64(done) * float64(total-done))
			eta = fmt.Sprintf(", ~%s left", left.Round(time.Second))
		}
		fmt.Fprintf(stderr, "[%d/%d %s%s] %s\n", done, total, el.Round(time.Second), eta, line)
	}
	fmt.Fprintf(stderr, "wsmux-bench bench: %d benchmarks, benchtime %s, count %d on %s\n",
		total, cmpOr(opts.Benchtime, "1s"), f.count, machine)
	results, err := bench.Run(ctx, opts, progress)
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	interrupted := err != nil
	if len(results) == 0 {
		if interrupted {
			return err
		}
		return errors.New("bench: no results (every benchmark failed or was skipped)")
	}

	if _, err := io.WriteString(stdout, textPreamble(machine, opts, results)); err != nil {
		return err
	}
	if err := bench.RenderText(stdout, results, bench.RenderOptions{}); err != nil {
		return err
	}
	if f.out != "" {
		if err := writeBenchOutputs(f, opts, machine, results, time.Since(start)); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wsmux-bench bench: wrote %s, %s and %s\n",
			filepath.Join(f.out, "bench.md"), filepath.Join(f.out, "bench.svg"), filepath.Join(f.out, "results.json"))
	}
	if interrupted {
		return err
	}
	return nil
}

// cpuNote explains bench.CPUPerMiB where the tables show it.
const cpuNote = bench.CPUPerMiB + ": CPU time of the process (user+sys, client and server together) per MiB moved; lower is better."

// hasCPU reports whether results hold a bench.CPUPerMiB figure.
func hasCPU(results []bench.Result) bool {
	return slices.ContainsFunc(results, func(r bench.Result) bool { return r.Metric == bench.CPUPerMiB })
}

// textPreamble is what `wsmux-bench bench` prints above its tables: the machine,
// the run's parameters and, if the tables have it, what cpu-ms/MiB means.
func textPreamble(m bench.Machine, opts bench.Options, results []bench.Result) string {
	var b strings.Builder
	fmt.Fprintf(&b, "CPU: %s\n", m)
	fmt.Fprintf(&b, "Medians of %d run(s), benchtime %s; client and server in one process over 127.0.0.1.\n",
		max(opts.Count, 1), cmpOr(opts.Benchtime, "1s"))
	if hasCPU(results) {
		b.WriteString(cpuNote + "\n")
	}
	b.WriteString("\n")
	return b.String()
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// plannedRuns counts the benchmarks Run will do (for the progress line), with
// the selection rules of bench.Run.
func plannedRuns(opts bench.Options) (int, error) {
	all := bench.Workloads()
	var ws []bench.Workload
	if len(opts.Workloads) == 0 {
		for _, w := range all {
			if !(opts.SkipHeavy && w.Heavy) {
				ws = append(ws, w)
			}
		}
	} else {
		for _, n := range opts.Workloads {
			found := false
			for _, w := range all {
				if w.Name == n || w.FullName() == n {
					found = true
					if !slices.ContainsFunc(ws, func(o bench.Workload) bool { return o.FullName() == w.FullName() }) {
						ws = append(ws, w)
					}
				}
			}
			if !found {
				return 0, fmt.Errorf("bench: no workload %q (have %s)", n, strings.Join(workloadNames(), ", "))
			}
		}
	}
	ts := bench.All()
	if len(opts.Transports) > 0 {
		ts = ts[:0]
		for _, n := range opts.Transports {
			t, ok := bench.Lookup(n)
			if !ok {
				return 0, fmt.Errorf("bench: no transport %q (have %s)", n, strings.Join(transportNames(), ", "))
			}
			ts = append(ts, t)
		}
	}
	total := 0
	for _, w := range ws {
		runs := max(opts.Count, 1)
		if w.Runs > 0 {
			runs = min(runs, w.Runs)
		}
		for _, t := range ts {
			if len(t.Workloads) == 0 || slices.Contains(t.Workloads, w.Name) {
				total += runs
			}
		}
	}
	return total, nil
}

func workloadNames() []string {
	var names []string
	for _, w := range bench.Workloads() {
		if !slices.Contains(names, w.Name) {
			names = append(names, w.Name)
		}
	}
	return names
}

// benchReport is results.json: where and how the figures were measured, and
// every figure of every run.
type benchReport struct {
	Command   string         `json:"command"`   // "wsmux-bench bench --count 3 --out ../docs/bench"
	Generated string         `json:"generated"` // RFC 3339, UTC
	Machine   bench.Machine  `json:"machine"`
	Benchtime string         `json:"benchtime"`
	Count     int            `json:"count"`
	Results   []bench.Result `json:"results"`
}

// writeBenchOutputs writes bench.md, bench.svg and results.json into f.out.
func writeBenchOutputs(f *benchFlags, opts bench.Options, m bench.Machine, results []bench.Result, took time.Duration) error {
	now := time.Now().UTC()
	command := strings.Join(append([]string{"wsmux-bench bench"}, commandArgs(f)...), " ")
	svg := renderSVG(results, m)
	if err := os.WriteFile(filepath.Join(f.out, "bench.svg"), []byte(svg), 0o644); err != nil {
		return err
	}
	var md strings.Builder
	md.WriteString("# wsmux bench\n\n")
	fmt.Fprintf(&md, "Generated by `%s` on %s in %s.\n\n", command, now.Format("2006-01-02 15:04 MST"), took.Round(time.Second))
	fmt.Fprintf(&md, "Machine: %s. Client and server run in one process over "+
		"127.0.0.1, so B/op and allocs/op count both ends. Each figure is the median of %d run(s), benchtime %s. "+
		"Ratios: each transport's primary figure divided by wsmux's and by the raw ws ceiling's "+
		"(for ns metrics lower is better, so a ratio above 1 means slower).",
		m, max(opts.Count, 1), cmpOr(opts.Benchtime, "1s"))
	if hasCPU(results) {
		md.WriteString(" " + cpuNote + " Its ratios (cpu vs ...) compare it the same way.")
	}
	md.WriteString("\n\n![wsmux bench chart](bench.svg)\n\n")
	if err := bench.RenderMarkdown(&md, results, bench.RenderOptions{}); err != nil {
		return err
	}
	md.WriteString("\n## Transports\n\n")
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.Transport] = true
	}
	for _, t := range bench.All() {
		if seen[t.Name] {
			fmt.Fprintf(&md, "- `%s`: %s\n", t.Name, t.Description)
		}
	}
	if err := os.WriteFile(filepath.Join(f.out, "bench.md"), []byte(md.String()), 0o644); err != nil {
		return err
	}
	js, err := json.MarshalIndent(benchReport{
		Command:   command,
		Generated: now.Format(time.RFC3339),
		Machine:   m,
		Benchtime: cmpOr(opts.Benchtime, "1s"),
		Count:     max(opts.Count, 1),
		Results:   results,
	}, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(f.out, "results.json"), append(js, '\n'), 0o644)
}

// commandArgs reconstructs the flags that were in effect.
func commandArgs(f *benchFlags) []string {
	var a []string
	if f.quick {
		a = append(a, "--quick")
	}
	if f.out != "" {
		a = append(a, "--out", f.out)
	}
	if f.transports != "" {
		a = append(a, "--transports", f.transports)
	}
	if f.workloads != "" {
		a = append(a, "--workloads", f.workloads)
	}
	if f.benchtime != "" {
		a = append(a, "--benchtime", f.benchtime)
	}
	if f.count != 1 {
		a = append(a, "--count", strconv.Itoa(f.count))
	}
	return a
}

// chartPanel is one workload's bars: the primary metric of each transport.
type chartPanel struct {
	title  string
	unit   string
	higher bool
	log    bool
	bars   []chartBar
}

type chartBar struct {
	transport string
	value     float64
	ceiling   bool
}

// panels computes, per workload (in bench.Workloads order), the median of
// the primary metric of each transport (in bench.All order).
func panels(results []bench.Result) []chartPanel {
	type key struct{ w, t, m string }
	samples := map[key][]float64{}
	for _, r := range results {
		k := key{r.Workload, r.Transport, r.Metric}
		samples[k] = append(samples[k], r.Value)
	}
	higher := map[string]bool{}
	units := map[string]string{}
	for _, r := range results {
		higher[r.Metric] = r.HigherIsBetter
		units[r.Metric] = r.Unit
	}
	var out []chartPanel
	for _, w := range bench.Workloads() {
		p := chartPanel{title: w.FullName() + ": " + w.Primary, unit: units[w.Primary], higher: higher[w.Primary]}
		for _, t := range bench.All() {
			s := samples[key{w.FullName(), t.Name, w.Primary}]
			if len(s) == 0 {
				continue
			}
			slices.Sort(s)
			m := s[len(s)/2]
			if len(s)%2 == 0 {
				m = (s[len(s)/2-1] + s[len(s)/2]) / 2
			}
			p.bars = append(p.bars, chartBar{transport: t.Name, value: m, ceiling: t.Ceiling})
		}
		if len(p.bars) == 0 {
			continue
		}
		lo, hi := math.Inf(1), 0.0
		for _, b := range p.bars {
			if b.value > 0 {
				lo = min(lo, b.value)
			}
			hi = max(hi, b.value)
		}
		p.log = hi > 0 && lo > 0 && hi/lo > 30
		out = append(out, p)
	}
	return out
}

// renderSVG draws one horizontal bar chart per workload, stacked vertically:
// wsmux's bars in blue, the ceilings in grey, the other peers in orange, each
// labelled with its figure and its ratio to wsmux, under a line naming the
// machine. Panels whose values span more than 30x use a logarithmic scale
// (said in the title).
func renderSVG(results []bench.Result, m bench.Machine) string {
	ps := panels(results)
	const (
		width    = 760
		labelW   = 130
		valueW   = 170
		barH     = 16
		gap      = 4
		titleH   = 26
		panelGap = 14
		top      = 48
	)
	plotW := width - labelW - valueW - 20
	height := top
	for _, p := range ps {
		height += titleH + len(p.bars)*(barH+gap) + panelGap
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n", width, height, width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#ffffff"/>`+"\n", width, height)
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">wsmux bench: primary figure per workload (ratio to wsmux in brackets)</text>`+"\n")
	fmt.Fprintf(&b, `<text x="10" y="36" font-size="11" fill="#555555">%s</text>`+"\n", html.EscapeString(m.String()))
	y := top
	for _, p := range ps {
		dir := "lower is better"
		if p.higher {
			dir = "higher is better"
		}
		scale := ""
		if p.log {
			scale = ", log scale"
		}
		fmt.Fprintf(&b, `<text x="10" y="%d" font-weight="bold">%s (%s%s)</text>`+"\n", y+17, html.EscapeString(p.title), dir, scale)
		y += titleH
		var ref float64
		for _, bar := range p.bars {
			if bar.transport == "wsmux" {
				ref = bar.value
			}
		}
		hi, lo := 0.0, math.Inf(1)
		for _, bar := range p.bars {
			hi = max(hi, bar.value)
			if bar.value > 0 {
				lo = min(lo, bar.value)
			}
		}
		length := func(v float64) float64 {
			switch {
			case hi <= 0 || v <= 0:
				return 0
			case p.log:
				// lo maps to a tenth of the width, hi to all of it.
				f := 0.1 + 0.9*math.Log(v/lo)/math.Log(hi/lo)
				return f * float64(plotW)
			}
			return v / hi * float64(plotW)
		}
		for _, bar := range p.bars {
			color := "#f28e2b"
			switch {
			case strings.HasPrefix(bar.transport, "wsmux"):
				color = "#1f77b4"
			case bar.ceiling:
				color = "#9e9e9e"
			}
			fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW, y+barH-4, html.EscapeString(bar.transport))
			w := max(length(bar.value), 1)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>`+"\n", labelW+6, y, w, barH, color)
			label := formatFigure(bar.value) + " " + p.unit
			if p.unit == "ns" && hi >= 1e4 {
				label = formatFigure(bar.value/1e3) + " µs"
			}
			if ref > 0 && bar.transport != "wsmux" {
				label += fmt.Sprintf(" (%.2fx)", bar.value/ref)
			}
			fmt.Fprintf(&b, `<text x="%.1f" y="%d">%s</text>`+"\n", float64(labelW+6)+w+4, y+barH-4, html.EscapeString(label))
			y += barH + gap
		}
		y += panelGap
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// formatFigure prints v with about four significant digits.
func formatFigure(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 1000 || v == math.Trunc(v):
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
	return strconv.FormatFloat(v, 'f', 3, 64)
}
