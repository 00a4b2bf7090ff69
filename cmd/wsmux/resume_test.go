package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/url"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testnet"
)

// demoEnv is a running `wsmux demo`: the gateway's address, the client
// flags its printed `wsmux exec` line gives, and the demo's log.
type demoEnv struct {
	gateway string // host:port
	flags   []string
	log     *testnet.Buffer
}

func startDemo(t *testing.T) *demoEnv {
	t.Helper()
	dir := t.TempDir()
	pr, pw := io.Pipe()
	e := &demoEnv{log: &testnet.Buffer{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		a := &app{stdin: strings.NewReader(""), stdout: pw, stderr: e.log, ctx: ctx}
		done <- runApp(a, []string{"demo", "--listen", "127.0.0.1:0", "--dir", dir})
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("demo exited %d; stderr:\n%s", code, e.log.String())
		}
	})
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Ctrl-C") {
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`\S+ exec (--server .*) shell -- uname -a`).FindStringSubmatch(printed.String())
	if m == nil {
		t.Fatalf("demo printed:\n%s\nstderr:\n%s", printed.String(), e.log.String())
	}
	e.flags = strings.Fields(m[1])
	for i, f := range e.flags {
		if f == "--server" && i+1 < len(e.flags) {
			u, err := url.Parse(e.flags[i+1])
			if err != nil {
				t.Fatal(err)
			}
			e.gateway = u.Host
		}
	}
	if e.gateway == "" {
		t.Fatalf("no --server in %q", m[1])
	}
	return e
}

// through returns the client flags with --server pointing at addr (a
// proxy in front of the gateway) instead.
func (e *demoEnv) through(addr string) []string {
	out := append([]string(nil), e.flags...)
	for i := range out {
		if out[i] == "--server" {
			u, _ := url.Parse(out[i+1])
			u.Host = addr
			out[i+1] = u.String()
		}
	}
	return out
}

// TestExecThroughGatewaySurvivesCuts: `wsmux exec` to the demo cluster
// through a proxy that resets the connection three times while the
// command writes about 10 MB: the output arrives whole (sha256 of the same
// command run here), the exit status is the command's, and both ends log
// each drop and resume (the gateway kept its upstream session: the
// command ran once).
func TestExecThroughGatewaySurvivesCuts(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	d := startDemo(t)
	const script = "seq 1 1400000; echo done >&2; exit 7"
	want, err := exec.Command("sh", "-c", "seq 1 1400000").Output()
	if err != nil {
		t.Fatal(err)
	}
	proxy := testnet.NewCutProxy(t, d.gateway, int64(len(want))/4, 3)
	args := append([]string{"exec", "--resume-timeout", "30s"}, d.through(proxy.Addr())...)
	args = append(args, "shell", "--", "sh", "-c", script)
	code, out, errOut := invoke(context.Background(), nil, args...)
	if code != 7 {
		t.Fatalf("exit %d, want the command's 7; stderr:\n%s", code, errOut)
	}
	if sha256.Sum256([]byte(out)) != sha256.Sum256(want) {
		t.Fatalf("stdout: %d bytes, want %d; sha256 differs", len(out), len(want))
	}
	if !strings.Contains(errOut, "done") {
		t.Errorf("stderr of the command lost: %q", errOut)
	}
	if proxy.Cuts() != 3 {
		t.Fatalf("%d cuts, want 3", proxy.Cuts())
	}
	if n := strings.Count(errOut, "exec: connection lost"); n != 3 {
		t.Errorf("%d drop log lines, want 3:\n%s", n, errOut)
	}
	if n := strings.Count(errOut, "exec: session resumed"); n != 3 {
		t.Errorf("%d resume log lines, want 3:\n%s", n, errOut)
	}
	gw := d.log.String()
	if n := strings.Count(gw, "gateway: session resumed"); n != 3 {
		t.Errorf("gateway: %d resumes logged, want 3:\n%s", n, gw)
	}
	if n := strings.Count(gw, "gateway: session starting"); n != 1 {
		t.Errorf("gateway: %d sessions started, want 1 (resumes start none):\n%s", n, gw)
	}
}

// TestPortForwardThroughGatewaySurvivesCuts: `wsmux port-forward` to the
// demo's web pod (an echo on ports other than 80) through a proxy that
// resets the connection three times; 8 MiB echo back whole through one
// forwarded connection, and each drop and resume is logged.
func TestPortForwardThroughGatewaySurvivesCuts(t *testing.T) {
	d := startDemo(t)
	proxy := testnet.NewCutProxy(t, d.gateway, 4<<20, 3)
	pr, pw := io.Pipe()
	var errb testnet.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		a := &app{stdin: strings.NewReader(""), stdout: pw, stderr: &errb, ctx: ctx}
		args := append([]string{"port-forward"}, d.through(proxy.Addr())...)
		done <- runApp(a, append(args, "web", ":9000"))
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("port-forward exited %d; stderr:\n%s", code, errb.String())
		}
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("port-forward printed nothing: %v; stderr:\n%s", err, errb.String())
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	m := regexp.MustCompile(`127\.0\.0\.1:(\d+) -> 9000`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("port-forward printed %q", line)
	}
	c, err := net.Dial("tcp", "127.0.0.1:"+m[1])
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, 8<<20)
	for i := range data {
		data[i] = byte(i*7 + i>>13)
	}
	go func() { _, _ = c.Write(data) }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("echo: %v after %d cuts; stderr:\n%s", err, proxy.Cuts(), errb.String())
	}
	if sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatal("echo: sha256 differs")
	}
	if proxy.Cuts() != 3 {
		t.Fatalf("%d cuts, want 3", proxy.Cuts())
	}
	logs := errb.String()
	if n := strings.Count(logs, "port-forward: connection lost"); n != 3 {
		t.Errorf("%d drop log lines, want 3:\n%s", n, logs)
	}
	if n := strings.Count(logs, "port-forward: session resumed"); n != 3 {
		t.Errorf("%d resume log lines, want 3:\n%s", n, logs)
	}
}

// TestResumeFlagsUsage: bad --resume-timeout and --affinity-cookie values
// are usage errors that name the flag, found before anything connects.
func TestResumeFlagsUsage(t *testing.T) {
	tokens := writeFile(t, "tokens", "secret-1\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"exec", "--server", "http://127.0.0.1:1", "--token-file", tokens, "--resume-timeout", "-1s", "pod", "--", "true"}, "--resume-timeout"},
		{[]string{"port-forward", "--server", "http://127.0.0.1:1", "--token-file", tokens, "--resume-timeout", "-1s", "pod", "80"}, "--resume-timeout"},
		{[]string{"tunnel", "forward", "--server", "http://127.0.0.1:1", "--token-file", tokens, "--resume-timeout", "-5s", "0:127.0.0.1:7"}, "--resume-timeout"},
		{[]string{"tunnel", "serve", "--allow", "127.0.0.1:7", "--token-file", tokens, "--affinity-cookie", "no-equals"}, "--affinity-cookie"},
		{[]string{"tunnel", "serve", "--allow", "127.0.0.1:7", "--token-file", tokens, "--affinity-cookie", "bad name=v"}, "--affinity-cookie"},
		{[]string{"tunnel", "serve", "--allow", "127.0.0.1:7", "--token-file", tokens, "--resume-timeout", "-1s"}, "--resume-timeout"},
	} {
		code, _, errOut := invoke(context.Background(), nil, tc.args...)
		if code != exitUsage || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want %d naming %s", tc.args, code, errOut, exitUsage, tc.want)
		}
	}
}
