package httpstream_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/adapters/internal/conformance"
	clientspdy "k8s.io/client-go/transport/spdy"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

const testProtocol = "test.k8s.io"

// upgradeServer answers upgrades with Handshake + the given upgrader and
// hands the server connections to conns.
func upgradeServer(t testing.TB, up k8shttpstream.ResponseUpgrader, h k8shttpstream.NewStreamHandler, conns chan<- k8shttpstream.Connection) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := k8shttpstream.Handshake(r, w, []string{testProtocol}); err != nil {
			return
		}
		c := up.UpgradeResponse(w, r, h)
		if c != nil {
			conns <- c
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// wsmuxHTTPFactory: a real HTTP upgrade through the RoundTripper, negotiated
// by client-go's spdy.Negotiate (as every supported client-go has it; the
// k8s.io/streaming view is taken with ForStreaming), against the
// ResponseUpgrader.
func wsmuxHTTPFactory(t testing.TB, h k8shttpstream.NewStreamHandler) (k8shttpstream.Connection, k8shttpstream.Connection) {
	conns := make(chan k8shttpstream.Connection, 1)
	srv := upgradeServer(t, wsmuxhttpstream.NewResponseUpgraderForStreaming(), h, conns)
	rt, err := wsmuxhttpstream.NewRoundTripper(nil)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, nil)
	conn, proto, err := clientspdy.Negotiate(rt, &http.Client{Transport: rt}, req, testProtocol)
	if err != nil {
		t.Fatal(err)
	}
	client := wsmuxhttpstream.ForStreaming(conn)
	if client == nil {
		t.Fatalf("Negotiate returned a %T, not the adapter's connection", conn)
	}
	if proto != testProtocol {
		t.Fatalf("negotiated %q", proto)
	}
	return client, <-conns
}

func TestConformanceWsmuxHTTP(t *testing.T) {
	conformance.RunAndReport(t, "wsmux (HTTP upgrade, client-go Negotiate)", wsmuxHTTPFactory, nil)
}
