package webui

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// BenchmarkBrowserExec measures, inside headless chromium, an exec of `cat`
// through the gateway, over WSMUX/1 (the TS client) and over
// v5.channel.k8s.io (a browser's plain WebSocket): throughput (each op one
// MiB written to cat and read back) and echo round trips of one byte (each
// op one round trip). The figures are the page's own clock (MB/s,
// rtt-median-us); browser start-up is outside them. Not part of make test:
//
//	go test -run '^$' -bench BrowserExec -benchtime 64x ./gateway/webui/
func BenchmarkBrowserExec(b *testing.B) {
	node, script, chromium := needBrowser(b, "browser-bench")
	srv := uiServer(b, nil)
	for _, proto := range []string{"wsmux", "v5"} {
		for _, mode := range []string{"throughput", "rtt"} {
			b.Run(proto+"/"+mode, func(b *testing.B) {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				defer cancel()
				cmd := exec.CommandContext(ctx, node, script, srv.URL, browserToken, proto, mode, strconv.Itoa(b.N))
				cmd.Env = append(os.Environ(), "CHROMIUM="+chromium)
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				if err != nil {
					b.Fatalf("node: %v\n%s", err, stderr.String())
				}
				var r struct {
					Ns          float64 `json:"ns"`
					Bytes       float64 `json:"bytes"`
					MedianRttNs float64 `json:"medianRttNs"`
				}
				if err := json.Unmarshal(bytes.TrimSpace(out), &r); err != nil {
					b.Fatalf("%v: %s", err, out)
				}
				b.ReportMetric(r.Ns/float64(b.N), "page-ns/op")
				if mode == "throughput" {
					b.ReportMetric(r.Bytes/(r.Ns/1e9)/1e6, "MB/s")
				} else {
					b.ReportMetric(r.MedianRttNs/1e3, "rtt-median-us")
				}
			})
		}
	}
}
