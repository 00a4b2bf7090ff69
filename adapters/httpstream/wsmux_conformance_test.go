package httpstream_test

import (
	"testing"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/adapters/internal/conformance"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// wsmuxTCPFactory runs the adapter over a loopback TCP pair (the WebSocket
// handshake is skipped: a session starts on any connection past it).
func wsmuxTCPFactory(t testing.TB, h k8shttpstream.NewStreamHandler) (k8shttpstream.Connection, k8shttpstream.Connection) {
	c, s := tcpPair(t)
	server, err := wsmuxhttpstream.NewServerConnectionForStreaming(s, h)
	if err != nil {
		t.Fatal(err)
	}
	client, err := wsmuxhttpstream.NewClientConnectionForStreaming(c)
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

func TestConformanceWsmux(t *testing.T) {
	conformance.RunAndReport(t, "wsmux", wsmuxTCPFactory, nil)
}
