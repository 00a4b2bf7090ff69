//go:build linux

package handoff

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	"github.com/wsmux/wsmux/cmd/wsmux/internal/clustertest"
	"github.com/wsmux/wsmux/cmd/wsmux/internal/ops"
	"github.com/wsmux/wsmux/cmd/wsmux/internal/testnet"
)

// apiProxy is the test controller's proxy for the plain API requests
// kubectl makes before it opens a stream (discovery, the pod's GET): to
// the cluster as the controller's caller (alice, group dev), as a real
// controller in front of a cluster would pass them on.
func apiProxy(t testing.TB, cl *clustertest.Cluster) http.Handler {
	t.Helper()
	cfg := cl.RestConfig()
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"dev"}}
	rt, err := rest.TransportFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Del("Authorization") // the transport sets the controller's own
		},
		Transport: rt,
	}
}

// kubectl runs the kubectl on this machine against the test controller
// with env added, and returns its stdout, stderr and exit code.
func (e *env) kubectl(t *testing.T, env []string, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	return testnet.RunCmd(t, e.kubectlCmd(t, ctx, env, args...), stdin)
}

// kubectlCmd is kubectl with the controller, behind a TLS-terminating
// proxy, as its server. A handed-off socket carries no TLS state, so a
// controller that hands off serves plain HTTP behind TLS at the edge (an
// ingress, a balancer), and kubectl sends its token only over TLS.
func (e *env) kubectlCmd(t *testing.T, ctx context.Context, env []string, args ...string) *exec.Cmd {
	t.Helper()
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not found in PATH: install kubectl (1.31 or later) to run the tests of unmodified kubectl through a controller's handoff")
	}
	edge := e.tlsEdge(t)
	home := t.TempDir()
	kubeconfig := filepath.Join(home, "no-kubeconfig")
	ca := filepath.Join(home, "ca.pem")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: edge.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	full := append([]string{"--server", edge.URL, "--token", ctlToken, "--certificate-authority", ca, "--kubeconfig", kubeconfig}, args...)
	c := exec.CommandContext(ctx, kubectl, full...)
	c.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH")}, env...)
	c.Dir = home
	return c
}

// tlsEdge starts a TLS-terminating reverse proxy in front of the
// controller (upgrades pass through it: Go's ReverseProxy splices a 101's
// two connections), closed at cleanup.
func (e *env) tlsEdge(t *testing.T) *httptest.Server {
	t.Helper()
	ctl, err := url.Parse(e.ctl.URL)
	if err != nil {
		t.Fatal(err)
	}
	edge := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(ctl) }})
	t.Cleanup(edge.Close)
	return edge
}

func (e *env) upgrades(proto, kind string) float64 {
	return ops.Value(e.g.Metrics().Upgrades.WithLabelValues(proto, kind))
}

var kubectlModes = []struct {
	name, proto string
	env         []string
}{
	{"websocket", "websocket", nil},
	{"spdy", "spdy", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
}

// TestKubectlThroughHandoff: the real kubectl binary, unmodified, talks
// to a controller that hands each stream's socket to the gateway: exec
// with stdin (checksummed), an exit code and stderr, over kubectl's
// WebSocket protocol and over SPDY; every upgrade came through a handoff
// and reached the cluster as the controller's caller.
func TestKubectlThroughHandoff(t *testing.T) {
	e := start(t, nil)
	data := make([]byte, 4<<20)
	rand.Read(data)
	want := sha256.Sum256(data)
	for _, mode := range kubectlModes {
		t.Run(mode.name, func(t *testing.T) {
			before := e.upgrades(mode.proto, "exec")
			out, errOut, code := e.kubectl(t, mode.env, bytes.NewReader(data), "exec", "-i", "-n", "default", "web-0", "--", "cat")
			if code != 0 || sha256.Sum256([]byte(out)) != want {
				t.Fatalf("exec -i cat: exit %d, %d of %d bytes back (sha256 differs or short), stderr %q", code, len(out), len(data), errOut)
			}
			out, errOut, code = e.kubectl(t, mode.env, nil, "exec", "-n", "default", "web-0", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
			if code != 3 || out != "out\n" || !strings.Contains(errOut, "err\n") {
				t.Fatalf("exec sh: exit %d, stdout %q, stderr %q", code, out, errOut)
			}
			// No fallback: both execs came in with the protocol tried.
			if n := e.upgrades(mode.proto, "exec") - before; n != 2 {
				t.Errorf("%s exec sessions through the gateway: %v, want 2", mode.proto, n)
			}
		})
	}
	for _, im := range e.cl.Impersonations() {
		if im.User != "alice" || strings.Join(im.Groups, ",") != "dev" {
			t.Errorf("the cluster saw %+v, want alice (dev)", im)
		}
	}
	e.metric(t, `wsmux_handoffs_total{result="accepted"} 4`)
}

// TestKubectlPortForwardThroughHandoff: kubectl port-forward through the
// handoff, both protocols: several connections at once each echo their
// bytes back whole through the forwarded port.
func TestKubectlPortForwardThroughHandoff(t *testing.T) {
	e := start(t, nil)
	for _, mode := range kubectlModes {
		t.Run(mode.name, func(t *testing.T) {
			before := e.upgrades(mode.proto, "portforward")
			ctx, cancel := context.WithCancel(context.Background())
			addrs, stop := testnet.PortForward(t, e.kubectlCmd(t, ctx, mode.env, "port-forward", "-n", "default", "pod/web-0", ":8080"), cancel, 1)
			defer stop()
			const conns = 4
			errs := make(chan error, conns)
			for range conns {
				go func() { errs <- testnet.EchoThrough(addrs[0], 1<<20) }()
			}
			for range conns {
				if err := <-errs; err != nil {
					t.Error(err)
				}
			}
			if n := e.upgrades(mode.proto, "portforward") - before; n != 1 {
				t.Errorf("%s port-forward sessions through the gateway: %v, want 1", mode.proto, n)
			}
		})
	}
}
