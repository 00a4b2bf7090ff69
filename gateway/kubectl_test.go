package gateway

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/pem"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

// kubectlEnv is a gateway (TLS, impersonating) in front of a stand-in
// cluster, and the kubectl on this machine pointed at it.
type kubectlEnv struct {
	*gw
	k *testnet.Kubectl
}

func startForKubectl(t *testing.T) *kubectlEnv {
	t.Helper()
	cl := clustertest.Start(t)
	cl.SetRBAC(map[string][]string{"alice": {"a"}, "group:ops": {"*"}})
	cl.Dir = t.TempDir()
	log := slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil))
	toks, err := auth.ParseTokens("tokens", []byte(tokenFile))
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Auth: auth.NewWithUsers(toks, nil), Impersonate: true, Cluster: cl.RestConfig(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewTLSServer(g.Handler())
	t.Cleanup(func() {
		srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	k := testnet.NewKubectl(t, srv.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	return &kubectlEnv{gw: &gw{g: g, srv: srv, cl: cl}, k: k}
}

var (
	wsOn     []string
	spdyOnly = []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}
)

func TestKubectlExec(t *testing.T) {
	e := startForKubectl(t)
	for _, mode := range []struct {
		name  string
		env   []string
		proto string
	}{{"websocket", wsOn, ProtoWebSocket}, {"spdy", spdyOnly, "spdy"}} {
		t.Run(mode.name, func(t *testing.T) {
			before := e.upgrades(mode.proto, "exec")
			defer func() {
				// No silent fallback: each exec came in with the protocol tried.
				if n := e.upgrades(mode.proto, "exec") - before; n != 3 {
					t.Errorf("%s exec sessions: %v, want 3", mode.proto, n)
				}
			}()
			out, errOut, code := e.k.Run(t, "alice-token", mode.env, strings.NewReader("hello kubectl"), "exec", "-i", "-n", "a", "web-0", "--", "cat")
			if code != 0 || out != "hello kubectl" {
				t.Fatalf("exec -i cat: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			out, errOut, code = e.k.Run(t, "alice-token", mode.env, nil, "exec", "-n", "a", "web-0", "--", "exit", "7")
			if code != 7 || out != "bye" {
				t.Fatalf("exec exit 7: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			out, errOut, code = e.k.Run(t, "alice-token", mode.env, nil, "exec", "-n", "a", "web-0", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
			if code != 3 || out != "out\n" || !strings.Contains(errOut, "err\n") {
				t.Fatalf("exec sh: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			// bob may not: the cluster's 403, kubectl's exit code 1.
			_, errOut, code = e.k.Run(t, "bob-token", mode.env, nil, "exec", "-n", "a", "web-0", "--", "cat")
			if code != 1 || !strings.Contains(errOut, `User "bob" cannot`) {
				t.Fatalf("bob: exit %d, stderr %q", code, errOut)
			}
		})
	}
	for _, im := range e.cl.Impersonations() {
		if im.User != "alice" && im.User != "bob" {
			t.Errorf("cluster saw %+v", im)
		}
	}
}

func (e *kubectlEnv) upgrades(proto, kind string) float64 {
	return ops.Value(e.g.Metrics().Upgrades.WithLabelValues(proto, kind))
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func TestKubectlCpAndAttach(t *testing.T) {
	e := startForKubectl(t)
	data := make([]byte, 32<<20)
	rand.Read(data)
	local := filepath.Join(e.k.Home, "up.bin")
	if err := os.WriteFile(local, data, 0o600); err != nil {
		t.Fatal(err)
	}
	remoteDir := filepath.Join(e.cl.Dir, "pod-fs") // the "container's" file system
	os.MkdirAll(remoteDir, 0o700)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"websocket", wsOn}, {"spdy", spdyOnly}} {
		t.Run(mode.name, func(t *testing.T) {
			before := e.upgrades(mode.name, "exec") + e.upgrades(mode.name, "attach")
			defer func() {
				// cp: test -d?, tar up, tar down; attach: one.
				if n := e.upgrades(mode.name, "exec") + e.upgrades(mode.name, "attach") - before; n < 3 {
					t.Errorf("%s sessions: %v, want at least 3 (no fallback)", mode.name, n)
				}
			}()
			remote := filepath.Join(remoteDir, mode.name+".bin")
			_, errOut, code := e.k.Run(t, "alice-token", mode.env, nil, "cp", local, "a/web-0:"+remote)
			if code != 0 {
				t.Fatalf("cp up: exit %d, stderr %q", code, errOut)
			}
			got, err := os.ReadFile(remote)
			if err != nil || sum(got) != sum(data) {
				t.Fatalf("cp up: %d bytes arrived (%v), sha256 differs", len(got), err)
			}
			back := filepath.Join(e.k.Home, mode.name+"-back.bin")
			_, errOut, code = e.k.Run(t, "alice-token", mode.env, nil, "cp", "a/web-0:"+remote, back)
			if code != 0 {
				t.Fatalf("cp down: exit %d, stderr %q", code, errOut)
			}
			got, err = os.ReadFile(back)
			if err != nil || sum(got) != sum(data) {
				t.Fatalf("cp down: %d bytes (%v), sha256 differs", len(got), err)
			}
			// attach to the "container" (it echoes its stdin); stdin's EOF
			// ends it.
			out, errOut, code := e.k.Run(t, "alice-token", mode.env, strings.NewReader("attached\n"), "attach", "-i", "-n", "a", "web-0")
			if code != 0 || out != "attached\n" {
				t.Fatalf("attach: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
		})
	}
}

func TestKubectlPortForward(t *testing.T) {
	e := startForKubectl(t)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"websocket", wsOn}, {"spdy", spdyOnly}} {
		t.Run(mode.name, func(t *testing.T) {
			before := e.upgrades(mode.name, "portforward")
			defer func() {
				if n := e.upgrades(mode.name, "portforward") - before; n != 1 {
					t.Errorf("%s port-forward sessions: %v, want 1 (no fallback)", mode.name, n)
				}
			}()
			addrs, stop := e.portForward(t, mode.env, "-n", "a", "pod/web-0", ":8080", ":9090")
			defer stop()
			const conns, size = 16, 8 << 20
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			for i := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					errs <- testnet.EchoThrough(addrs[i%2], size)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Error(err)
				}
			}
		})
	}
}

// portForward runs kubectl port-forward with args and returns the local
// addresses it printed, and a func that stops it.
func (e *kubectlEnv) portForward(t *testing.T, env []string, args ...string) ([]string, func()) {
	t.Helper()
	want := 0
	for _, a := range args {
		if strings.Contains(a, ":") && !strings.Contains(a, "/") {
			want++
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return testnet.PortForward(t, e.k.Cmd(ctx, "alice-token", env, append([]string{"port-forward"}, args...)...), cancel, want)
}

// TestKubectlExecTTY: kubectl exec -it on a terminal (script(1) gives it a
// pseudo-terminal of 100x30): the container sees that size, and what is
// typed comes back.
func TestKubectlExecTTY(t *testing.T) {
	script, err := exec.LookPath("script")
	if err != nil {
		t.Skip("script(1) not found: it provides the terminal for kubectl exec -it (util-linux)")
	}
	e := startForKubectl(t)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"websocket", wsOn}, {"spdy", spdyOnly}} {
		t.Run(mode.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			kc := e.k.Cmd(ctx, "alice-token", mode.env, "exec", "-it", "-n", "a", "web-0", "--", "tty")
			line := "stty cols 100 rows 30; exec"
			for _, a := range kc.Args {
				line += " '" + a + "'"
			}
			c := exec.CommandContext(ctx, script, "-qec", line, "/dev/null")
			c.Env = kc.Env
			stdin, _ := c.StdinPipe()
			out := &notifyWriter{want: "size 100x30", seen: make(chan struct{})}
			c.Stdout, c.Stderr = out, out
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			select {
			case <-out.seen:
			case <-ctx.Done():
				t.Fatalf("no terminal size; output %q", out.String())
			}
			typed := &notifyWriter{want: "typed-back", seen: make(chan struct{})}
			out.mu.Lock()
			out.w = typed
			out.mu.Unlock()
			stdin.Write([]byte("typed-back"))
			select {
			case <-typed.seen:
			case <-ctx.Done():
				t.Fatalf("typed text did not come back; output %q", out.String())
			}
			stdin.Close()
			_ = c.Process.Kill()
			_ = c.Wait()
		})
	}
	if n := e.upgrades(ProtoWebSocket, "exec"); n != 1 {
		t.Errorf("websocket exec sessions %v, want 1", n)
	}
}
