package main

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/bench"
)

// `wsmux-bench bench --help` prints cobra's help, with two-dash flags, to standard
// output, as every other command does; so do -h and the old -help.
func TestBenchHelp(t *testing.T) {
	for _, h := range []string{"--help", "-h", "-help"} {
		code, out, errOut := invoke(nil, nil, "bench", h)
		if code != exitOK || errOut != "" {
			t.Errorf("bench %s: exit %d, stderr %q", h, code, errOut)
		}
		for _, want := range []string{"Usage:\n  wsmux-bench bench [flags]", "      --count int", "      --quick", "      --out directory", "--log-level", "cpu-ms/MiB"} {
			if !strings.Contains(out, want) {
				t.Errorf("bench %s: stdout lacks %q:\n%s", h, want, out)
			}
		}
		if strings.Contains(out, "\n  -count") {
			t.Errorf("bench %s: Go-style flags in help:\n%s", h, out)
		}
	}
}

// benchCmd is `wsmux-bench bench` under a root with the persistent --log-level,
// parsing into the returned flags.
func benchCmd() (*cobra.Command, *benchFlags) {
	f := &benchFlags{}
	cmd := newBenchCmdFor(f)
	root := &cobra.Command{Use: "wsmux-bench"}
	root.PersistentFlags().String("log-level", "info", "")
	root.AddCommand(cmd)
	cmd.InitDefaultHelpFlag()
	return cmd, f
}

func TestBenchFlagSpellings(t *testing.T) {
	want := benchFlags{quick: true, out: "docs/bench", transports: "ws,wsmux", workloads: "Bulk1", benchtime: "50x", count: 3}
	for _, args := range [][]string{
		{"-count", "3", "-out", "docs/bench", "-quick", "-transports", "ws,wsmux", "-workloads", "Bulk1", "-benchtime", "50x"},
		{"--count", "3", "--out", "docs/bench", "--quick", "--transports", "ws,wsmux", "--workloads", "Bulk1", "--benchtime", "50x"},
		{"--count=3", "-out=docs/bench", "-quick=true", "--transports=ws,wsmux", "-workloads=Bulk1", "-benchtime=50x", "-log-level", "debug"},
	} {
		cmd, f := benchCmd()
		help, err := parseBenchArgs(cmd, f, args)
		if err != nil || help {
			t.Errorf("%q: help %v, error %v", args, help, err)
			continue
		}
		if !reflect.DeepEqual(*f, want) {
			t.Errorf("%q parsed as %+v, want %+v", args, *f, want)
		}
	}

	cmd, f := benchCmd()
	if _, err := parseBenchArgs(cmd, f, nil); err != nil || f.count != 1 || f.quick || f.out != "" {
		t.Errorf("no flags: %+v, %v", *f, err)
	}
	for _, args := range [][]string{
		{"-count", "0"}, {"--count", "x"}, {"--nope"}, {"-nope"}, {"extra"},
		{"--log-level", "loud"}, {"-out"},
	} {
		cmd, f := benchCmd()
		_, err := parseBenchArgs(cmd, f, args)
		var ce *codeError
		if !errors.As(err, &ce) || ce.code != exitUsage {
			t.Errorf("%q: error %v, want a usage error", args, err)
		}
	}
}

func TestDoubleDash(t *testing.T) {
	cmd, _ := benchCmd()
	_ = cmd.InheritedFlags()
	tests := []struct{ in, want []string }{
		{[]string{"-count", "3", "-quick"}, []string{"--count", "3", "--quick"}},
		// A value that looks like a flag stays a value.
		{[]string{"-out", "-count", "-quick"}, []string{"--out", "-count", "--quick"}},
		{[]string{"--workloads", "-quick"}, []string{"--workloads", "-quick"}},
		{[]string{"-out=-x", "-h", "-nope"}, []string{"--out=-x", "-h", "-nope"}},
		{[]string{"-log-level", "warn"}, []string{"--log-level", "warn"}},
		{[]string{"-quick", "--", "-count"}, []string{"--quick", "--", "-count"}},
	}
	for _, tt := range tests {
		if got := doubleDash(cmd.Flags(), tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("doubleDash(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// A tiny real run: the machine and cpu-ms/MiB are in the printed output, in
// bench.md and in results.json.
func TestBenchTinyRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	code, out, errOut := invoke(nil, nil, "bench", "-workloads", "Bulk1/dir=c2s,Echo64", "-transports", "ws,yamux", "-benchtime", "5x", "-out", dir)
	if code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, errOut)
	}
	model := bench.CPUModel()
	for _, want := range []string{"CPU: " + model + ", ", "Bulk1/dir=c2s: MB/s (higher is better)", "Echo64: ns/op"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	md, err := os.ReadFile(filepath.Join(dir, "bench.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "Machine: "+model+", ") || !strings.Contains(string(md), "wsmux-bench bench --out "+dir) {
		t.Errorf("bench.md:\n%s", md)
	}
	js, err := os.ReadFile(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"machine": {`, `"cpu": `, `"workload": "Bulk1/dir=c2s"`, `"higher_is_better": true`} {
		if !strings.Contains(string(js), want) {
			t.Errorf("results.json lacks %s:\n%.600s", want, js)
		}
	}
	var rep benchReport
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Machine.CPU != model || rep.Benchtime != "5x" || rep.Count != 1 || len(rep.Results) == 0 {
		t.Errorf("results.json: %+v", rep)
	}
	cpu := false
	for _, r := range rep.Results {
		cpu = cpu || (r.Metric == bench.CPUPerMiB && r.Workload == "Bulk1/dir=c2s")
	}
	if onUnix := !strings.Contains("windows plan9 js wasip1", rep.Machine.GOOS); onUnix != cpu {
		t.Errorf("%s in results.json: %v; on a unix system it must be, elsewhere not", bench.CPUPerMiB, cpu)
	}
	if cpu {
		for _, want := range []string{bench.CPUPerMiB, "cpu vs ws", "cpu vs yamux"} {
			if !strings.Contains(out, want) || !strings.Contains(string(md), want) {
				t.Errorf("%q missing from stdout or bench.md:\n%s\n%s", want, out, md)
			}
		}
	}
}
