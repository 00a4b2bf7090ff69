package e2e_test

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"

	"github.com/wsmux/wsmux/adapters/bridge"
	"github.com/wsmux/wsmux/adapters/e2e/internal/kubelettest"
	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	clientspdy "k8s.io/client-go/transport/spdy"
)

// wsmuxClient is client-go over wsmux's RoundTripper: the same calls as
// spdyClient with the import path changed.
var wsmuxClient = client{
	name: "wsmux",
	new: func(t testing.TB) (http.RoundTripper, clientspdy.Upgrader) {
		rt, err := wsmuxhttpstream.NewRoundTripper(nil)
		if err != nil {
			t.Fatal(err)
		}
		return rt, rt
	},
	method: http.MethodPost,
}

// viaBridge puts a wsmux->SPDY bridge in front of the kubelet.
func viaBridge(t testing.TB, k *kubelettest.Kubelet, u *url.URL) *url.URL {
	base, _ := url.Parse(k.Server.URL)
	h := bridge.NewWsmuxToSPDY(base, nil)
	var mu sync.Mutex
	var splices []*bridge.Splicer
	h.OnSplice = func(s *bridge.Splicer) { mu.Lock(); splices = append(splices, s); mu.Unlock() }
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, s := range splices {
			n += s.Streams()
		}
		if len(splices) == 0 || n == 0 {
			t.Errorf("the bridge spliced %d connections, %d streams: the wsmux path was not used", len(splices), n)
		}
	})
	bu, _ := url.Parse(srv.URL)
	out := *u
	out.Host = bu.Host
	return &out
}

func TestExecWsmuxViaBridge(t *testing.T) { runExecTests(t, wsmuxClient, viaBridge) }
func TestPortForwardWsmuxViaBridge(t *testing.T) {
	runPortForwardTests(t, wsmuxClient, viaBridge, 16<<20)
}
