package main

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/bench"
	"github.com/wsmux/wsmux/mux"
)

// idleOpts are the options of `wsmux-bench idle` (and of `wsmux-bench bench
// --idle-sessions N`, its other spelling).
type idleOpts struct {
	sessions int
	active   int
	duration time.Duration
	driver   string
	client   string
}

// newIdleCmd is `wsmux-bench idle`: the many-idle-sessions run with the
// clients in a second process.
func newIdleCmd() *cobra.Command {
	var o idleOpts
	cmd := &cobra.Command{
		Use:   "idle [flags]",
		Short: "Measure the server's memory and goroutines per idle wsmux session, clients in a second process",
		Long: `Serves --sessions wsmux sessions on 127.0.0.1 whose clients run in a second
process (this binary again: one process may hold only so many descriptors),
each with one open stream that moved one byte each way and then stays idle,
and prints the server's heap+stack, resident set and goroutines per session
(after two garbage collections), with its descriptor limit. With --active,
that many sessions then echo 64 bytes in a loop for --duration (the server
echoes on one goroutine per active stream, as an application would) while
the others stay idle: the round trips' p50, p99 and maximum, the fewest one
session completed (none starved), and the server's heap sampled every second.

--driver picks the server sessions' driver: eventloop, fastpaths or
goroutines. The clients always use the event loop.
` + "`wsmux-bench bench --idle-sessions N`" + ` is the same as --sessions N.`,
		Example: `  wsmux-bench idle --sessions 15000 --driver eventloop
  wsmux-bench idle --sessions 15000 --driver fastpaths
  wsmux-bench idle --sessions 15000 --active 1000 --duration 60s
  wsmux-bench bench --idle-sessions 15000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runBenchIdle(cmd, o) },
	}
	fl := cmd.Flags()
	fl.IntVar(&o.sessions, "sessions", 15000, "idle sessions to hold")
	fl.IntVar(&o.active, "active", 0, "then this many of them echo 64 bytes in a loop for --duration while the rest stay idle (round trips: p50, p99, the fewest on one session; the server's heap over the run)")
	fl.DurationVar(&o.duration, "duration", 60*time.Second, "how long the active sessions echo")
	fl.StringVar(&o.driver, "driver", mux.DriverEventLoop.String(), "the server sessions' driver: eventloop, fastpaths, goroutines")
	fl.StringVar(&o.client, "client", "", "run as the client process of the server at this address (used by idle itself)")
	_ = fl.MarkHidden("client")
	return cmd
}

// runBenchIdle runs the many-sessions measurement (or, with o.client, its
// client process).
func runBenchIdle(cmd *cobra.Command, o idleOpts) error {
	if o.sessions < 1 {
		return usageErrorf("--sessions %d: want 1 or more", o.sessions)
	}
	if o.active < 0 || o.active > o.sessions || o.duration <= 0 {
		return usageErrorf("--active %d --duration %v: want 0..--sessions active sessions and a positive duration", o.active, o.duration)
	}
	ctx := cmd.Context()
	if o.client != "" {
		return bench.RunIdleClients(ctx, o.client, o.sessions, o.active, o.duration, cmd.InOrStdin(), cmd.OutOrStdout())
	}
	var d mux.Driver
	switch o.driver {
	case mux.DriverEventLoop.String():
		d = mux.DriverEventLoop
	case mux.DriverFastPaths.String():
		d = mux.DriverFastPaths
	case mux.DriverGoroutines.String():
		d = mux.DriverGoroutines
	default:
		return usageErrorf("--driver %q: want eventloop, fastpaths or goroutines", o.driver)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	rep, err := bench.RunIdleServer(ctx, bench.IdleRun{
		Sessions: o.sessions,
		Driver:   d,
		Active:   o.active,
		Duration: o.duration,
		Progress: cmd.ErrOrStderr(),
		Client: func(addr string) *exec.Cmd {
			c := exec.CommandContext(ctx, self, "idle", "--client", addr, "--sessions", strconv.Itoa(o.sessions),
				"--active", strconv.Itoa(o.active), "--duration", o.duration.String())
			c.Stderr = os.Stderr
			return c
		},
	})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), rep)
	return err
}
