// Package bench is the side-by-side benchmark harness of wsmux: the same
// workloads run over every transport registered here, so the numbers compare
// wsmux with what Kubernetes uses today and with general-purpose multiplexers,
// against the ceilings of plain TCP and raw WebSocket.
//
// Transports (see All, in this order): "tcp" and "ws" (ceilings: no
// multiplexing, one connection per stream; ws is gobwas/ws binary frames with
// client masking, what wsmux itself runs over), "spdy" (k8s.io/streaming's
// httpstream/spdy on moby/spdystream, used as kubectl port-forward uses it),
// "spdy-over-ws" (the same SPDY session tunnelled in WebSocket messages with
// client-go's TunnelingConnection, as kubectl port-forward does since
// KEP-4006), "yamux" and "smux" (protocol v2). wsmux adds itself with
// Register from a file of this package ("wsmux", and "wsmux-httpstream" for
// the Kubernetes httpstream adapter). Every Pair runs client and server in
// this process over 127.0.0.1, so allocation figures count both ends.
//
// Workloads (see Workloads): Bulk1 (one stream, 32 KiB writes, each
// direction), Streams8, Streams64 and Streams1024 (that many streams sending
// 1 MiB each at once, aggregate MB/s), Echo64 (64-byte round trip, ns/op is the RTT),
// OpenClose (open, 1-byte echo, close), Interactive (64-byte echo p50/p99
// beside a saturating bulk stream: head-of-line blocking), IdleStreams (heap
// per idle stream at 10,000 streams) and NeverRead (what a stream whose reader
// never reads costs the sender, the heap and the other streams).
//
// Three dimensions run beside those (issue 39): Bulk1Read (Bulk1 client to
// server read 4, 8 or 32 KiB at a time, or by io.Copy into io.Discard until
// io.EOF); TLSBulk1, TLSStreams64 and TLSEcho64 (the same over TLS on
// loopback: wss for the WebSocket transports, tls.Conn under the others,
// TLS 1.3 with one ECDSA P-256 certificate for all, see Net); and WANBulk1,
// WANStreams8 and WANInteractive through the link emulator (LinkConfig,
// Link: a user-space relay with a one-way delay, a bandwidth cap and
// optional periodic stalls) at 20 and 80 ms RTT and 1 Gbit/s, each a fixed
// 1 s warm-up and 2 s measurement, run once whatever the count
// (Workload.Runs). The transport "wsmux-httpstream-eventloop" runs the bulk
// workloads only (Transport.Workloads).
//
// The throughput workloads (Bulk1, Streams8, Streams64, Streams1024) also report
// cpu-ms/MiB (CPUPerMiB): the process's CPU time, user plus system from
// getrusage, per MiB moved while the clock ran. Both ends run in this process,
// so it is what a MiB costs client and server together, a figure that a busy
// or different machine changes far less than MB/s. Where getrusage does not
// exist (not unix) the metric is left out.
//
// This directory is its own module (github.com/wsmux/wsmux/bench), so that
// nothing else links the peers; run the benchmarks in it with
//
//	go test -run=NONE -bench=. -benchmem .
//
// or a selection, e.g. -bench='Bulk1|Echo64' or -bench='/transport=yamux';
// -benchtime=1x runs every benchmark once (about a minute in all). Streams1024
// and IdleStreams each take seconds per transport; the Streams1024 figures of
// the ceilings (1024 separate TCP connections) are noisy, as the kernel's
// zero-window probing stalls some connections for hundreds of milliseconds.
// Compare runs with benchstat, or print tables with ratios to a reference
// transport and to the ws ceiling from saved output:
//
//	go test -run=NONE -bench=. -benchmem -count=3 . | tee bench.txt
//	WSMUX_BENCH_RESULTS=bench.txt go test -run=TestRenderResults -v .
//
// The same workloads run outside `go test` through Run (testing.Benchmark), and
// RenderText and RenderMarkdown print the tables; `wsmux-bench bench`
// (./cmd/wsmux-bench) is built on them. go test -race . runs a smoke test of
// every transport.
//
// This package pulls in Kubernetes client libraries, yamux and smux, and
// imports "testing": it is a tool, and must never be imported by the library
// packages (frame, flow, mux, adapters/...).
package bench
