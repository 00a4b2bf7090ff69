package e2e_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/wsmux/wsmux/adapters/bridge"
	"github.com/wsmux/wsmux/adapters/e2e/internal/kubelettest"
	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	clientspdy "k8s.io/client-go/transport/spdy"
)

// An unmodified kubelet does not speak wsmux: it refuses the upgrade, the
// round tripper reports an UpgradeFailureError, and client-go's fallback
// executor drops back to SPDY.
func TestExecFallbackToSPDY(t *testing.T) {
	k := kubelettest.Start(t)
	u := k.ExecURL("echo fallback", false, true, false, false)

	rt, up := wsmuxClient.new(t)
	primary, err := remotecommand.NewSPDYExecutorForTransports(rt, up, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	srt, sup := spdyClient.new(t)
	secondary, err := remotecommand.NewSPDYExecutorForTransports(srt, sup, http.MethodPost, u)
	if err != nil {
		t.Fatal(err)
	}
	var sawFailure error
	ex, err := remotecommand.NewFallbackExecutor(primary, secondary, func(err error) bool {
		sawFailure = err
		return apihttpstream.IsUpgradeFailure(err)
	})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out}); err != nil {
		t.Fatalf("fallback exec: %v", err)
	}
	if out.String() != "fallback\n" {
		t.Fatalf("stdout %q", out.String())
	}
	if !apihttpstream.IsUpgradeFailure(sawFailure) {
		t.Fatalf("primary failed with %v, want an UpgradeFailureError", sawFailure)
	}
	t.Logf("wsmux against an unmodified kubelet: %v", sawFailure)
}

// proxyHop puts a byte-for-byte upgrade proxy in front of the bridge.
func proxyHop(kind string) target {
	return func(t testing.TB, k *kubelettest.Kubelet, u *url.URL) *url.URL {
		b := viaBridge(t, k, u)
		base := &url.URL{Scheme: b.Scheme, Host: b.Host}
		var h http.Handler
		switch kind {
		case "UpgradeAwareHandler":
			// What kube-apiserver and the kubelet do with upgrade requests.
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				loc := *base
				loc.Path, loc.RawQuery = r.URL.Path, r.URL.RawQuery
				p := proxy.NewUpgradeAwareHandler(&loc, nil, false, true, errorResponder{t})
				p.ServeHTTP(w, r)
			})
		case "ReverseProxy":
			h = httputil.NewSingleHostReverseProxy(base)
		}
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		pu, _ := url.Parse(srv.URL)
		out := *u
		out.Host = pu.Host
		return &out
	}
}

type errorResponder struct{ t testing.TB }

func (e errorResponder) Error(w http.ResponseWriter, _ *http.Request, err error) {
	e.t.Errorf("upgrade proxy: %v", err)
	http.Error(w, err.Error(), http.StatusBadGateway)
}

func TestExecWsmuxThroughUpgradeAwareHandler(t *testing.T) {
	runExecTests(t, wsmuxClient, proxyHop("UpgradeAwareHandler"))
}

func TestPortForwardWsmuxThroughUpgradeAwareHandler(t *testing.T) {
	runPortForwardTests(t, wsmuxClient, proxyHop("UpgradeAwareHandler"), 4<<20)
}

func TestExecWsmuxThroughReverseProxy(t *testing.T) {
	runExecTests(t, wsmuxClient, proxyHop("ReverseProxy"))
}

func TestPortForwardWsmuxThroughReverseProxy(t *testing.T) {
	runPortForwardTests(t, wsmuxClient, proxyHop("ReverseProxy"), 4<<20)
}

// spdyViaTwoBridges: a SPDY client (today's kubectl) -> SPDY->wsmux bridge
// -> wsmux -> wsmux->SPDY bridge -> the kubelet: wsmux in the middle hop.
func spdyViaTwoBridges(t testing.TB, k *kubelettest.Kubelet, u *url.URL) *url.URL {
	inner := viaBridge(t, k, u)
	srv := httptest.NewServer(bridge.NewSPDYToWsmux(&url.URL{Scheme: "http", Host: inner.Host}, nil))
	t.Cleanup(srv.Close)
	pu, _ := url.Parse(srv.URL)
	out := *u
	out.Host = pu.Host
	return &out
}

func TestExecSPDYClientThroughWsmuxHop(t *testing.T) {
	runExecTests(t, spdyClient, spdyViaTwoBridges)
}

func TestPortForwardSPDYClientThroughWsmuxHop(t *testing.T) {
	runPortForwardTests(t, spdyClient, spdyViaTwoBridges, 4<<20)
}

// Port-forward with kubectl's dialer shape, NewFallbackDialerForStreaming
// (wsmux first, SPDY second), against the unmodified kubelet.
func TestPortForwardFallbackDialerToSPDY(t *testing.T) {
	k := kubelettest.Start(t)
	u := k.PortForwardURL()
	rt, err := wsmuxhttpstream.NewRoundTripper(nil)
	if err != nil {
		t.Fatal(err)
	}
	primary := clientspdy.NewDialerForStreaming(rt, &http.Client{Transport: rt}, http.MethodPost, u)
	srt, sup := spdyClient.new(t)
	secondary := clientspdy.NewDialerForStreaming(sup, &http.Client{Transport: srt}, http.MethodPost, u)
	var sawFailure error
	dialer := portforward.NewFallbackDialerForStreaming(primary, secondary, func(err error) bool {
		sawFailure = err
		return apihttpstream.IsUpgradeFailure(err)
	})
	stopCh, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:8080"}, stopCh, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- pf.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("ForwardPorts: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	ports, _ := pf.GetPorts()
	if err := echoThrough(fmt.Sprintf("127.0.0.1:%d", ports[0].Local), 1<<20); err != nil {
		t.Error(err)
	}
	close(stopCh)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !apihttpstream.IsUpgradeFailure(sawFailure) {
		t.Fatalf("primary failed with %v, want an UpgradeFailureError", sawFailure)
	}
}
