package tsinterop_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/conformance"
	"github.com/wsmux/wsmux/internal/tsinterop"
)

// TestConformanceTSClient runs `wsmux conformance --listen --echo` (the
// runner as a server) against the TS client, which redials after every
// session and echoes the streams the runner opens: every client-side check
// must pass.
func TestConformanceTSClient(t *testing.T) {
	node, script := tsinterop.NeedCompiled(t, "conformance-client")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, "ws://"+ln.Addr().String()+"/")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var report strings.Builder
	sum, err := conformance.Run(ctx, conformance.Options{Listener: ln, Echo: true, AcceptTimeout: 20 * time.Second, Out: &report})
	_ = ln.Close()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if err != nil {
		t.Fatalf("run: %v\n%s\nnode stderr: %s", err, report.String(), stderr.String())
	}
	t.Logf("conformance --listen against the TS client: %d passed, %d failed, %d skipped", sum.Pass, sum.Fail, sum.Skip)
	if sum.Fail > 0 {
		for _, r := range sum.Results {
			if r.Status == "FAIL" {
				t.Errorf("FAIL %s %s: %s", r.Section, r.Name, r.Detail)
			}
		}
		t.Logf("report:\n%s", report.String())
	}
	// Every check that can run against a client without --slow: the Go client passes 70.
	if sum.Pass < 70 {
		t.Errorf("%d checks passed, want at least 70:\n%s", sum.Pass, report.String())
	}
	resumeSkipped(t, sum, 2, "the client does not negotiate RESUME")
}

// resumeSkipped checks that every resumption check ran (want of them) and
// was SKIP, the first one with the reason given (the TS peers do not offer
// RESUME: a browser cannot send the resume headers).
func resumeSkipped(t *testing.T, sum *conformance.Summary, want int, why string) {
	t.Helper()
	n := 0
	for _, r := range sum.Results {
		if !strings.HasPrefix(r.Name, "resume-") {
			continue
		}
		n++
		if r.Status != "SKIP" {
			t.Errorf("%s: %s (%s), want SKIP", r.Name, r.Status, r.Detail)
		}
		if n == 1 && !strings.Contains(r.Detail, why) {
			t.Errorf("%s: SKIP reason %q, want %q", r.Name, r.Detail, why)
		}
	}
	if n != want {
		t.Errorf("%d resumption checks reported, want %d", n, want)
	}
}

// TestConformanceTSServer runs `wsmux conformance --server --echo` against
// the TS Session in the server role (over the ws package in Node): every
// check must pass, the handshake refusal included.
func TestConformanceTSServer(t *testing.T) {
	node, script := tsinterop.NeedCompiled(t, "conformance-server")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var ready struct {
		Port int `json:"port"`
	}
	if err := json.NewDecoder(stdout).Decode(&ready); err != nil || ready.Port == 0 {
		t.Fatalf("the TS server did not start: %v\n%s", err, stderr.String())
	}
	var report strings.Builder
	sum, err := conformance.Run(ctx, conformance.Options{URL: "ws://127.0.0.1:" + strconv.Itoa(ready.Port) + "/", Echo: true, Out: &report})
	if err != nil {
		t.Fatalf("run: %v\n%s\nnode stderr: %s", err, report.String(), stderr.String())
	}
	t.Logf("conformance --server against the TS server: %d passed, %d failed, %d skipped", sum.Pass, sum.Fail, sum.Skip)
	for _, r := range sum.Results {
		if r.Status == "FAIL" {
			t.Errorf("FAIL %s %s: %s", r.Section, r.Name, r.Detail)
		}
	}
	if sum.Fail > 0 || sum.Pass < 70 {
		t.Errorf("%d checks passed, want at least 70:\n%s", sum.Pass, report.String())
	}
	resumeSkipped(t, sum, 4, "the peer does not negotiate RESUME")
}
