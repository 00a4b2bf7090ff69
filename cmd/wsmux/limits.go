package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway/ops"
)

// limitFlags are the per-caller limits of tunnel serve and gateway.
type limitFlags struct {
	sessions int
	streams  int
	dials    float64
	buffer   string
	bufBytes int64
}

func (f *limitFlags) register(c *cobra.Command, tunnel bool) {
	fl := c.Flags()
	fl.IntVar(&f.sessions, "max-sessions-per-caller", 8, "concurrent sessions one caller (token or client certificate) may hold; more get 429 (0: no limit)")
	fl.IntVar(&f.streams, "max-streams", 100, "concurrent streams per session; a client waits for a free one (0: wsmux's default)")
	what := "upstream sessions (exec, attach, port-forward)"
	if tunnel {
		what = "target dials"
	}
	fl.Float64Var(&f.dials, "max-dials-per-second", 20, what+" one caller may start per second, in bursts of twice that; more are refused (0: no limit)")
	fl.StringVar(&f.buffer, "max-buffer-per-caller", "64MiB", "bytes one caller's sessions may make the server buffer (receive windows and send buffers, split between its sessions); a number with an optional KiB, MiB or GiB suffix (0: wsmux's defaults)")
}

// validate checks the flags (usage errors naming the flag).
func (f *limitFlags) validate() error {
	if f.sessions < 0 {
		return usageErrorf("--max-sessions-per-caller %d: want 0 (no limit) or more", f.sessions)
	}
	if f.streams < 0 || f.streams > 1<<20 {
		return usageErrorf("--max-streams %d: want 0 (the default) up to 1048576", f.streams)
	}
	if f.dials < 0 {
		return usageErrorf("--max-dials-per-second %g: want 0 (no limit) or more", f.dials)
	}
	n, err := parseSize(f.buffer)
	if err != nil {
		return usageErrorf("--max-buffer-per-caller %q: %v", f.buffer, err)
	}
	if n != 0 && n < 1<<20 {
		return usageErrorf("--max-buffer-per-caller %q: want 0 (no limit) or at least 1MiB", f.buffer)
	}
	f.bufBytes = n
	return nil
}

func (f *limitFlags) limits() ops.Limits {
	return ops.Limits{SessionsPerCaller: f.sessions, StreamsPerSession: f.streams, DialsPerSecond: f.dials, BufferPerCaller: f.bufBytes}
}

// parseSize parses "65536", "64KiB", "64MiB", "1GiB" (also KB/MB/GB and
// K/M/G, all binary).
func parseSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	mult := int64(1)
	for _, u := range []struct {
		suffix []string
		m      int64
	}{{[]string{"GiB", "GB", "G"}, 1 << 30}, {[]string{"MiB", "MB", "M"}, 1 << 20}, {[]string{"KiB", "KB", "K"}, 1 << 10}} {
		for _, sfx := range u.suffix {
			if strings.HasSuffix(t, sfx) {
				t, mult = strings.TrimSuffix(t, sfx), u.m
				break
			}
		}
		if mult != 1 {
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > (1<<40)/mult {
		return 0, fmt.Errorf("want a size such as 64MiB")
	}
	return n * mult, nil
}
