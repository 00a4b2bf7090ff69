package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/clustertest"
)

// waitMetric polls url (a /metrics page) until it has line: the reload is
// the event waited for; the deadline only fails the test.
func waitMetric(t *testing.T, url, line string) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(30 * time.Second)
	var body string
	for {
		if resp, err := http.Get(url); err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			if strings.Contains(body, line+"\n") {
				return
			}
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("%s never showed %s; last:\n%s", url, line, body)
		}
	}
}

// replace writes content beside path and renames it over path, as a
// deployment updates a file (the watch never reads half of it).
func replace(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

// TestGatewayTokenFileReloadOnChange: `wsmux gateway` picks up an edit of
// its token file on disk without a restart or a signal: a revoked token
// gets 401 (exit 3), the new one works; a broken edit keeps the tokens in
// force. Each step waits for wsmux_reloads_total to count the reload.
func TestGatewayTokenFileReloadOnChange(t *testing.T) {
	cl := clustertest.Start(t)
	kubeconfig := writeFile(t, "kubeconfig", cl.Kubeconfig())
	gatewayTokens := writeFile(t, "gateway-tokens", "old-caller,alice,1,dev\n")
	oldTok := writeFile(t, "old", "old-caller\n")
	newTok := writeFile(t, "new", "new-caller\n")
	addr := freeAddr(t)
	stop := background(t, "gateway", "--listen", addr, "--token-file", gatewayTokens, "--kubeconfig", kubeconfig,
		"--token-file-check", "10ms")
	defer stop()
	server := "http://" + addr
	metrics := server + "/metrics"
	waitHTTP(t, server+"/healthz")
	defer http.DefaultClient.CloseIdleConnections()
	waitMetric(t, metrics, `wsmux_reloads_total{file="token_file",result="success"} 1`)

	exec := func(tokFile string) (int, string) {
		code, out, errOut := invoke(context.Background(), strings.NewReader("hi"),
			"exec", "--server", server, "--token-file", tokFile, "web-0", "-i", "--", "cat")
		return code, out + errOut
	}
	if code, out := exec(oldTok); code != 0 || out != "hi" {
		t.Fatalf("old token before the edit: exit %d, %q", code, out)
	}
	replace(t, gatewayTokens, "new-caller,alice,1,dev\n")
	waitMetric(t, metrics, `wsmux_reloads_total{file="token_file",result="success"} 2`)
	if code, out := exec(oldTok); code != exitAuth || !strings.Contains(out, "401") {
		t.Errorf("revoked token: exit %d, %q; want %d and the 401", code, out, exitAuth)
	}
	if code, out := exec(newTok); code != 0 || out != "hi" {
		t.Errorf("new token: exit %d, %q", code, out)
	}
	replace(t, gatewayTokens, "new-caller,alice,1,dev,extra\n")
	waitMetric(t, metrics, `wsmux_reloads_total{file="token_file",result="failure"} 1`)
	if code, out := exec(newTok); code != 0 || out != "hi" {
		t.Errorf("new token after a broken edit: exit %d, %q", code, out)
	}
}
