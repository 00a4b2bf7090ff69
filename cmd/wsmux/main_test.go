package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/wsmux/wsmux/internal/testkit/leakcheck"

	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/internal/testnet"
)

func TestMain(m *testing.M) {
	if os.Getenv(envRunCommand) == "1" {
		// The test binary as the wsmux command: replicas a test can kill.
		os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	leakcheck.VerifyTestMain(m, testnet.IgnoredGoroutines()...)
}

// envRunCommand set to 1 makes the test binary run as the wsmux command
// (startCommand).
const envRunCommand = "WSMUX_TEST_RUN_COMMAND"

// invoke runs the command line in-process and returns its exit code and
// output. ctx, when not nil, stands in for SIGTERM.
func invoke(ctx context.Context, stdin io.Reader, args ...string) (int, string, string) {
	var out, errb testnet.Buffer
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	a := &app{stdin: stdin, stdout: &out, stderr: &errb, ctx: ctx}
	code := runApp(a, args)
	return code, out.String(), errb.String()
}

// background runs a long-lived command (a server, a forwarder) in-process;
// stop stands in for SIGTERM and checks it exits 0.
func background(t *testing.T, args ...string) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var errOut string
	go func() {
		var code int
		code, _, errOut = invoke(ctx, nil, args...)
		done <- code
	}()
	return func() {
		t.Helper()
		cancel()
		select {
		case code := <-done:
			if code != 0 {
				t.Errorf("%s exited %d after SIGTERM; stderr:\n%s", args[0], code, errOut)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s did not stop", args[0])
		}
	}
}

// TestHelpEveryCommand: every command, including ones other files add,
// has help text and exits 0 with --help.
func TestHelpEveryCommand(t *testing.T) {
	root := newRootCmd(&app{stdin: strings.NewReader(""), stdout: io.Discard, stderr: io.Discard})
	var walk func(c *cobra.Command)
	n := 0
	walk = func(c *cobra.Command) {
		if c.Hidden || c.Name() == "help" || c.Name() == "completion" {
			return
		}
		n++
		path := strings.Fields(c.CommandPath())[1:]
		t.Run(strings.Join(append([]string{"wsmux"}, path...), "_"), func(t *testing.T) {
			if c.Short == "" || c.Long == "" {
				t.Errorf("%q has no Short or Long help", c.CommandPath())
			}
			code, out, errOut := invoke(nil, nil, append(path, "--help")...)
			if code != exitOK || !strings.Contains(out+errOut, "Usage") {
				t.Errorf("--help: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	if n < 7 {
		t.Errorf("only %d commands", n)
	}
}

func TestExtraCommandsRegistered(t *testing.T) {
	saved := extraCommands
	defer func() { extraCommands = saved }()
	extraCommands = append(extraCommands, func() *cobra.Command {
		return &cobra.Command{Use: "hello", Short: "s", Long: "l", RunE: func(c *cobra.Command, _ []string) error {
			fmt.Fprint(c.OutOrStdout(), "hi")
			return nil
		}}
	})
	code, out, _ := invoke(nil, nil, "hello")
	if code != 0 || out != "hi" {
		t.Fatalf("extra command: %d %q", code, out)
	}
}

func writeFile(t testing.TB, name, content string) string {
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestUsageErrors(t *testing.T) {
	tok := writeFile(t, "token", "x\n")
	for _, args := range [][]string{
		{"bogus"},
		{"--log-level", "loud", "tunnel", "serve"},
		{"tunnel", "serve", "--nope"},
		{"tunnel", "serve", "--token-file", tok},                         // no --allow
		{"tunnel", "serve", "--allow", "db:5432"},                        // no --token-file
		{"tunnel", "serve", "--allow", "db", "--token-file", tok},        // bad target
		{"tunnel", "serve", "--allow", "db:1", "--token-file", tok, "x"}, // extra arg
		{"tunnel", "forward", "--token-file", tok, "1:db:2"},             // no --server
		{"tunnel", "forward", "--server", "http://h", "--token-file", tok, "1:db"},
		{"tunnel", "forward", "--server", "http://h", "--token-file", tok},
		{"tunnel"},
		{"gateway", "--listen", "127.0.0.1:0"}, // no auth
		{"gateway", "--client-ca", tok, "--listen", "127.0.0.1:0"},
		{"exec", "--server", "http://h", "--token-file", tok, "pod"},
		{"exec", "--server", "http://h", "--token-file", tok, "pod", "--"},
		{"exec", "--server", "http://h", "--token-file", tok, "a", "b", "--", "ls"},
		{"port-forward", "--server", "http://h", "--token-file", tok, "pod"},
	} {
		code, _, errOut := invoke(nil, nil, args...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d (stderr %q)", args, code, exitUsage, errOut)
		}
	}
}

// TestTunnelCommands runs `tunnel serve` and `tunnel forward` as the CLI
// does, moves data with a checksum, checks /healthz and /metrics, the exit
// code 3 for a wrong token, and a graceful stop (SIGTERM's path) with
// exit 0.
func TestTunnelCommands(t *testing.T) {
	target := testnet.Echo(t)
	tokens := writeFile(t, "tokens", "# callers\nsecret-1\n")
	serveAddr := freeAddr(t)
	stopServe := background(t, "tunnel", "serve", "--listen", serveAddr, "--allow", target, "--token-file", tokens)
	waitHTTP(t, "http://"+serveAddr+"/healthz")

	bad := writeFile(t, "bad", "wrong\n")
	code, _, errOut := invoke(context.Background(), nil, "tunnel", "forward", "--server", "http://"+serveAddr, "--token-file", bad, "0:"+target)
	if code != exitAuth || !strings.Contains(errOut, "401") {
		t.Errorf("forward with a wrong token: exit %d, stderr %q; want %d and the 401", code, errOut, exitAuth)
	}

	local := freeAddr(t)
	stopForward := background(t, "tunnel", "forward", "--server", "http://"+serveAddr, "--token-file", tokens, local+":"+target)
	c := testnet.Dial(t, local)
	data := make([]byte, 2<<20)
	rand.Read(data)
	go func() { c.Write(data); c.(*net.TCPConn).CloseWrite() }()
	got, err := io.ReadAll(c)
	c.Close()
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("through the tunnel: %d bytes, %v", len(got), err)
	}

	resp, err := http.Get("http://" + serveAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	m, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`wsmux_sessions_active{protocol="wsmux"} 1`,
		`wsmux_auth_failures_total{reason="invalid_token"} 1`,
		`wsmux_tunnel_bytes_total{direction="to_target"} 2.097152e+06`,
		`wsmux_streams_total{opened_by="remote"} 1`,
	} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	http.DefaultClient.CloseIdleConnections()

	stopForward()
	stopServe()
}

func waitHTTP(t testing.TB, url string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				http.DefaultClient.CloseIdleConnections()
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not up: %v", url, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestGatewayAndClientCommands runs `gateway` with a kubeconfig in front of
// the stand-in cluster, then `exec` and `port-forward` as the CLI does.
func TestGatewayAndClientCommands(t *testing.T) {
	cl := clustertest.Start(t)
	kubeconfig := writeFile(t, "kubeconfig", cl.Kubeconfig())
	gatewayTokens := writeFile(t, "gateway-tokens", "caller,alice,1,dev\n")
	tokens := writeFile(t, "tokens", "caller\n")
	addr := freeAddr(t)
	stopGateway := background(t, "gateway", "--listen", addr, "--token-file", gatewayTokens, "--kubeconfig", kubeconfig)
	server := "http://" + addr
	waitHTTP(t, server+"/healthz")

	code, out, errOut := invoke(context.Background(), strings.NewReader("hello gateway"),
		"exec", "--server", server, "--token-file", tokens, "-n", "shop", "web-0", "-c", "app", "-i", "--", "cat")
	if code != 0 || out != "hello gateway" {
		t.Errorf("exec cat: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, _ = invoke(context.Background(), nil, "exec", "--server", server, "--token-file", tokens, "web-0", "--", "exit", "7")
	if code != 7 || out != "bye" {
		t.Errorf("exec exit 7: exit %d, stdout %q", code, out)
	}
	bad := writeFile(t, "bad", "nope\n")
	code, _, errOut = invoke(context.Background(), nil, "exec", "--server", server, "--token-file", bad, "web-0", "--", "cat")
	if code != exitAuth || !strings.Contains(errOut, "invalid bearer token") {
		t.Errorf("exec with a wrong token: exit %d, stderr %q", code, errOut)
	}
	code, _, errOut = invoke(context.Background(), nil, "exec", "--server", server, "--token-file", tokens, "-t", "web-0", "--", "cat")
	if code != 0 || !strings.Contains(errOut, "Unable to use a TTY") {
		t.Errorf("exec -t without a terminal: exit %d, stderr %q", code, errOut)
	}

	// port-forward: a fixed local port, echoed through the stand-in.
	local := freeAddr(t)
	_, port, _ := net.SplitHostPort(local)
	stopPF := background(t, "port-forward", "--server", server, "--token-file", tokens, "web-0", port+":8080")
	c := testnet.Dial(t, local)
	c.Write([]byte("pf"))
	c.(*net.TCPConn).CloseWrite()
	got, _ := io.ReadAll(c)
	c.Close()
	if string(got) != "pf" {
		t.Errorf("port-forward echo %q", got)
	}
	code, _, errOut = invoke(context.Background(), nil, "port-forward", "--server", server, "--token-file", bad, "web-0", ":8080")
	if code != exitAuth {
		t.Errorf("port-forward with a wrong token: exit %d, stderr %q", code, errOut)
	}
	stopPF()
	stopGateway()
}
