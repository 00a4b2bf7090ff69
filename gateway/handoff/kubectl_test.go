//go:build linux

package handoff

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
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

// kubectl is the kubectl on this machine with the controller as its
// server, behind a TLS-terminating proxy (upgrades pass through it: Go's
// ReverseProxy splices a 101's two connections). A handed-off socket
// carries no TLS state, so a controller that hands off serves plain HTTP
// behind TLS at the edge (an ingress, a balancer); and kubectl sends its
// token only over TLS.
func (e *env) kubectl(t *testing.T) *testnet.Kubectl {
	t.Helper()
	ctl, err := url.Parse(e.ctl.URL)
	if err != nil {
		t.Fatal(err)
	}
	edge := httptest.NewTLSServer(&httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(ctl) }})
	t.Cleanup(edge.Close)
	return testnet.NewKubectl(t, edge.URL, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: edge.Certificate().Raw}))
}

func (e *env) upgrades(proto, kind string) float64 {
	return ops.Value(e.g.Metrics().Upgrades.WithLabelValues(proto, kind))
}

// kubectlModes are kubectl's two protocols, named as the gateway's metrics
// name them.
var kubectlModes = []struct {
	proto string
	env   []string
}{
	{"websocket", nil},
	{"spdy", []string{"KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false", "KUBECTL_PORT_FORWARD_WEBSOCKETS=false"}},
}

// TestKubectlThroughHandoff: the real kubectl binary, unmodified, talks
// to a controller that hands each stream's socket to the gateway: exec
// with stdin (checksummed), an exit code and stderr, over kubectl's
// WebSocket protocol and over SPDY; every upgrade came through a handoff
// and reached the cluster as the controller's caller.
func TestKubectlThroughHandoff(t *testing.T) {
	e := start(t, nil)
	k := e.kubectl(t)
	data := make([]byte, 4<<20)
	rand.Read(data)
	want := sha256.Sum256(data)
	for _, mode := range kubectlModes {
		t.Run(mode.proto, func(t *testing.T) {
			before := e.upgrades(mode.proto, "exec")
			out, errOut, code := k.Run(t, ctlToken, mode.env, bytes.NewReader(data), "exec", "-i", "-n", "default", "web-0", "--", "cat")
			if code != 0 || sha256.Sum256([]byte(out)) != want {
				t.Fatalf("exec -i cat: exit %d, %d of %d bytes back (sha256 differs or short), stderr %q", code, len(out), len(data), errOut)
			}
			out, errOut, code = k.Run(t, ctlToken, mode.env, nil, "exec", "-n", "default", "web-0", "--", "sh", "-c", "echo out; echo err >&2; exit 3")
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
	k := e.kubectl(t)
	for _, mode := range kubectlModes {
		t.Run(mode.proto, func(t *testing.T) {
			before := e.upgrades(mode.proto, "portforward")
			ctx, cancel := context.WithCancel(context.Background())
			addrs, stop := testnet.PortForward(t, k.Cmd(ctx, ctlToken, mode.env, "port-forward", "-n", "default", "pod/web-0", ":8080"), cancel, 1)
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
