package main

import (
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// affinityFlag is --affinity-cookie of the server commands.
type affinityFlag struct{ v string }

func (f *affinityFlag) register(c *cobra.Command) {
	c.Flags().StringVar(&f.v, "affinity-cookie", "",
		"NAME=VALUE: a cookie set on every new session's upgrade and sent back by resuming clients, for a load balancer to send resumes to this replica (docs/load-balancers.md)")
}

// cookie parses the flag (nil when not set).
func (f *affinityFlag) cookie() (*http.Cookie, error) {
	if f.v == "" {
		return nil, nil
	}
	name, value, ok := strings.Cut(f.v, "=")
	c := &http.Cookie{Name: name, Value: value, Path: "/", HttpOnly: true}
	if !ok || name == "" || c.Valid() != nil {
		return nil, usageErrorf("--affinity-cookie %q: want NAME=VALUE with a cookie name and a plain value, for example wsmux_replica=gw-0", f.v)
	}
	return c, nil
}

// resumeFlag is --resume-timeout of the client commands: session
// resumption (docs/spec/wsmux-resume-v1.md), offered to the server and in
// effect when it supports it.
type resumeFlag struct{ timeout time.Duration }

func (f *resumeFlag) register(c *cobra.Command) {
	c.Flags().DurationVar(&f.timeout, "resume-timeout", 30*time.Second,
		"when the connection drops, how long to keep redialling to resume the session where it stopped (with a server that supports resumption; 0 turns it off)")
}

func (f *resumeFlag) validate() error {
	if f.timeout < 0 {
		return usageErrorf("--resume-timeout %s: want a duration of 0 (off) or more, for example 30s", f.timeout)
	}
	return nil
}

// logTo returns the event handler that logs drops and resumes to l.
func (f *resumeFlag) logTo(l *slog.Logger, prefix string) func(mux.ResumeEvent) {
	return func(e mux.ResumeEvent) { ops.LogResumeEvent(l, prefix, e) }
}

// registerServer registers --resume-timeout on a server command.
func (f *resumeFlag) registerServer(c *cobra.Command) {
	c.Flags().DurationVar(&f.timeout, "resume-timeout", 30*time.Second,
		"how long a session whose connection dropped is kept for its client to resume it (same caller, single-use token; 0 turns resumption off)")
}
