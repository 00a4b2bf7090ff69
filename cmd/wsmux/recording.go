package main

import (
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/recording"
)

// recordingFlags configure the gateway's session recording.
type recordingFlags struct {
	dir, url, policyFile, cluster string
	stdin, required               bool
	maxBytes, rate                string
}

func (f *recordingFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.dir, "recording-dir", "", "record exec, attach and port-forward sessions into this directory (one file per session, written as it runs; replayed at /ui/recordings/); see docs/gateway.md")
	fl.StringVar(&f.url, "recording-url", "", "record sessions by POSTing each, as it runs, to this collector URL (instead of --recording-dir)")
	fl.StringVar(&f.policyFile, "recording-policy", "", "YAML: which sessions are recorded (by user, group, namespace, pod, subresource; stdin: true to record what callers type) and who may replay (auditors); reloaded like --policy-file; without it every session is recorded and nobody may replay")
	fl.BoolVar(&f.stdin, "recording-stdin", false, "without --recording-policy: record what callers send too (it carries passwords typed at prompts)")
	fl.BoolVar(&f.required, "recording-required", false, "fail closed: refuse a session whose recording cannot start, and end one whose recording fails (the caller is told why)")
	fl.StringVar(&f.maxBytes, "recording-max-bytes", "64MiB", "what one session's recording keeps at most; past it the recording says so and stops")
	fl.StringVar(&f.rate, "recording-rate", "256KiB", "bytes per second one session's recording takes (in bursts of 1MiB); a flood above it is left out and marked")
	fl.StringVar(&f.cluster, "recording-cluster", "", "the cluster's name in recordings (default: the kubeconfig's server)")
}

// recorder returns the Recorder of the flags, nil when none is asked for;
// the policy file is reloaded every reloadEvery until stop is closed.
func (f *recordingFlags) recorder(a *app, m *ops.Metrics, reloadEvery time.Duration, stop <-chan struct{}) (*recording.Recorder, error) {
	if f.dir == "" && f.url == "" {
		if f.required || f.policyFile != "" {
			return nil, usageErrorf("--recording-required and --recording-policy need --recording-dir or --recording-url")
		}
		return nil, nil
	}
	cfg := recording.Config{Stdin: f.stdin, Required: f.required, Cluster: f.cluster, Metrics: recording.NewMetrics(m.Registry)}
	switch {
	case f.dir != "" && f.url != "":
		return nil, usageErrorf("--recording-dir and --recording-url: pick one")
	case f.dir != "":
		if st, err := os.Stat(f.dir); err != nil || !st.IsDir() {
			return nil, usageErrorf("--recording-dir %s: not a directory: create it (mode 0700) first", f.dir)
		}
		cfg.Sink = &recording.DirSink{Dir: f.dir}
	default:
		u, err := url.Parse(f.url)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, usageErrorf("--recording-url %q: want an http or https URL", f.url)
		}
		cfg.Sink = &recording.HTTPSink{URL: f.url}
	}
	var err error
	if cfg.MaxBytes, err = parseSize(f.maxBytes); err != nil || cfg.MaxBytes <= 0 {
		return nil, usageErrorf("--recording-max-bytes %q: want a size above 0 (64MiB, say)", f.maxBytes)
	}
	if cfg.Rate, err = parseSize(f.rate); err != nil || cfg.Rate <= 0 {
		return nil, usageErrorf("--recording-rate %q: want bytes per second above 0 (256KiB, say)", f.rate)
	}
	if f.policyFile != "" {
		cfg.Policy = &recording.PolicyStore{}
		pr := &auth.FileReloader{Path: f.policyFile, What: "recording policy", Log: a.log, OnReload: m.ReloadHook("recording_policy"), Load: func(b []byte) error {
			p, err := recording.ParsePolicy(b)
			if err == nil {
				cfg.Policy.Set(p)
			}
			return err
		}}
		if err := pr.Reload(); err != nil {
			return nil, usageErrorf("--recording-policy: %v", err)
		}
		if reloadEvery > 0 {
			go pr.Watch(stop, reloadEvery)
		}
	}
	r, err := recording.New(cfg)
	if err != nil {
		return nil, usageErrorf("%v", err)
	}
	return r, nil
}
