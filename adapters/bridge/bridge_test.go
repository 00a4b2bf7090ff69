package bridge_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/wsmux/wsmux/adapters/bridge"
	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/adapters/internal/conformance"
	"go.uber.org/goleak"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown"),
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Connection).shutdown.func1"),
		goleak.IgnoreAnyFunction("github.com/moby/spdystream.(*Stream).WaitTimeout"),
	)
}

const proto = "test.k8s.io"

// server is an upgrading endpoint handing its connections to conns.
func server(t testing.TB, up k8shttpstream.ResponseUpgrader, h k8shttpstream.NewStreamHandler, conns chan<- k8shttpstream.Connection) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := k8shttpstream.Handshake(r, w, []string{proto}); err != nil {
			return
		}
		if c := up.UpgradeResponse(w, r, h); c != nil {
			conns <- c
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type upgradeRT interface {
	http.RoundTripper
	NewConnection(*http.Response) (k8shttpstream.Connection, error)
}

func dial(t testing.TB, rt upgradeRT, u string) k8shttpstream.Connection {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, u, nil)
	req.Header.Set(k8shttpstream.HeaderProtocolVersion, proto)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	c, err := rt.NewConnection(resp)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Header.Get(k8shttpstream.HeaderProtocolVersion); got != proto {
		t.Fatalf("negotiated %q through the bridge, want %q", got, proto)
	}
	return c
}

func wsmuxRT(t testing.TB) upgradeRT {
	rt, err := wsmuxhttpstream.NewRoundTripper(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt.ForStreaming()
}

func spdyRT(t testing.TB) upgradeRT {
	rt, err := spdy.NewRoundTripper(nil)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// bridged builds client -> bridge -> server for the conformance suite.
func bridged(downUp k8shttpstream.ResponseUpgrader, clientRT func(testing.TB) upgradeRT, upstream func(*url.URL) bridge.UpstreamDialer, serverUp k8shttpstream.ResponseUpgrader) conformance.Factory {
	return func(t testing.TB, h k8shttpstream.NewStreamHandler) (k8shttpstream.Connection, k8shttpstream.Connection) {
		conns := make(chan k8shttpstream.Connection, 1)
		srv := server(t, serverUp, h, conns)
		base, _ := url.Parse(srv.URL)
		var wg sync.WaitGroup
		bh := &bridge.Handler{Upgrader: downUp, Dial: upstream(base)}
		bsrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			wg.Add(1)
			defer wg.Done()
			bh.ServeHTTP(w, r)
		}))
		t.Cleanup(func() { bsrv.Close(); wg.Wait() })
		c := dial(t, clientRT(t), bsrv.URL)
		return c, <-conns
	}
}

func wsmuxUpstream(u *url.URL) bridge.UpstreamDialer { return bridge.WsmuxUpstream(u, nil) }
func spdyUpstream(u *url.URL) bridge.UpstreamDialer  { return bridge.SPDYUpstream(u, nil) }

// heavy checks run through the wsmux→wsmux bridge only: the SPDY legs'
// bulk behaviour is covered by the direct SPDY run.
var heavy = []string{conformance.Concurrent64x1MiB, conformance.LargeWrite}

func TestConformanceBridgeWsmuxToWsmux(t *testing.T) {
	f := bridged(wsmuxhttpstream.NewResponseUpgraderForStreaming(), wsmuxRT, wsmuxUpstream, wsmuxhttpstream.NewResponseUpgraderForStreaming())
	conformance.RunAndReport(t, "wsmux→bridge→wsmux", f, nil)
}

func TestConformanceBridgeWsmuxToSPDY(t *testing.T) {
	f := bridged(wsmuxhttpstream.NewResponseUpgraderForStreaming(), wsmuxRT, spdyUpstream, spdy.NewResponseUpgrader())
	// A SPDY server upstream keeps its own semantics for what it writes.
	conformance.RunAndReport(t, "wsmux→bridge→spdy", f, conformance.SPDYKnown.Subset(conformance.ResetSeenByPeer, conformance.SlowReaderIsolation),
		heavy...)
}

func TestConformanceBridgeSPDYToWsmux(t *testing.T) {
	f := bridged(spdy.NewResponseUpgrader(), spdyRT, wsmuxUpstream, wsmuxhttpstream.NewResponseUpgraderForStreaming())
	// The client leg is SPDY.
	conformance.RunAndReport(t, "spdy→bridge→wsmux", f, conformance.SPDYKnown, heavy...)
}
