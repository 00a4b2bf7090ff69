package main

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// TestConformanceCommand runs `wsmux conformance` against `wsmux tunnel
// serve` as it is (every check passes), as a server for a mux client, and
// checks the exit statuses of a failing run and of bad usage.
func TestConformanceCommand(t *testing.T) {
	target := testnet.Echo(t)
	tokens := writeFile(t, "tokens", "secret-1\n")
	serveAddr := freeAddr(t)
	stopServe := background(t, "tunnel", "serve", "--listen", serveAddr, "--allow", target, "--token-file", tokens)
	waitHTTP(t, "http://"+serveAddr+"/healthz")

	code, out, errOut := invoke(context.Background(), nil, "conformance", "--server", "http://"+serveAddr,
		"--token-file", tokens, "--echo", "--header", "Target: "+target)
	if code != exitOK || !strings.Contains(out, " 0 failed") {
		t.Fatalf("against tunnel serve: exit %d\n%s%s", code, out, errOut)
	}
	t.Log(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])

	// Without the stream header the tunnel refuses the streams: the echo
	// checks fail and the exit status says so.
	code, out, _ = invoke(context.Background(), nil, "conformance", "--server", "http://"+serveAddr,
		"--token-file", tokens, "--echo", "--run", "^data-echo$", "--timeout", "2s")
	if code != exitError || !strings.Contains(out, "FAIL §4.1") {
		t.Fatalf("failing run: exit %d\n%s", code, out)
	}

	bad := writeFile(t, "bad", "wrong\n")
	if code, _, errOut := invoke(context.Background(), nil, "conformance", "--server", "http://"+serveAddr, "--token-file", bad); code != exitAuth {
		t.Errorf("wrong token: exit %d, want %d; %s", code, exitAuth, errOut)
	}
	stopServe()

	for _, args := range [][]string{
		{"conformance"},
		{"conformance", "--server", "http://h", "--listen", "127.0.0.1:0", "--token-file", tokens},
		{"conformance", "--listen", "127.0.0.1:0", "--header", "no-colon"},
		{"conformance", "--listen", "127.0.0.1:0", "--run", "("},
	} {
		if code, _, _ := invoke(context.Background(), nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d", args, code, exitUsage)
		}
	}

	// --listen: a mux client connects once per check.
	addr := freeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			sess, err := mux.Dial(ctx, "ws://"+addr+"/", nil)
			if err != nil {
				continue
			}
			for {
				st, err := sess.AcceptStream(ctx)
				if err != nil {
					break
				}
				wg.Go(func() {
					buf := make([]byte, 32<<10)
					for {
						n, err := st.Read(buf)
						if n > 0 {
							_, _ = st.Write(buf[:n])
						}
						if err != nil {
							break
						}
					}
					_ = st.CloseWrite()
				})
			}
			_ = sess.Close()
		}
	})
	code, out, errOut = invoke(context.Background(), nil, "conformance", "--listen", addr, "--echo", "--run", "^(ping-ack|half-close-both-ways|syn-wrong-parity)$")
	cancel()
	wg.Wait()
	if code != exitOK || !strings.Contains(out, "3 passed") {
		t.Fatalf("--listen: exit %d\n%s%s", code, out, errOut)
	}
}
