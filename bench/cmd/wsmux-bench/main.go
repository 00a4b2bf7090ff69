// Command wsmux-bench runs wsmux's side-by-side benchmarks: `wsmux-bench
// bench` prints the tables of package bench (every workload over tcp, ws,
// spdy, spdy-over-ws, yamux, smux, wsmux and wsmux-httpstream), and
// `wsmux-bench idle` measures the server's memory per idle wsmux session
// with the clients in a second process (this binary again).
//
// It imports package bench and, through it, the benchmark peers (yamux,
// smux, gorilla/websocket, Kubernetes' SPDY on moby/spdystream), which is
// why it lives in the bench module and not in the `wsmux` command: the
// product binary links none of them.
//
// Exit codes (scripts may rely on them):
//
//	0  success
//	1  runtime error (a failed benchmark run, I/O, the idle run's second process)
//	2  usage error (unknown command or flag, bad or missing arguments)
package main

import (
	"context"
	"os"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
