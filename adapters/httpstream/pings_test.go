package httpstream_test

import (
	"testing"
	"time"

	wsmuxhttpstream "github.com/wsmux/wsmux/adapters/httpstream"
	apihttpstream "k8s.io/apimachinery/pkg/util/httpstream"
)

// Keepalive pings must not defeat SetIdleTimeout (kubernetes#102569: with
// SPDY, a client pinging every 5 s keeps the kubelet's idle timeout from
// ever firing), and they keep an otherwise idle connection alive.
func TestPingsDoNotDefeatIdleTimeout(t *testing.T) {
	c, s := tcpPair(t)
	server, err := wsmuxhttpstream.NewServerConnectionWithPings(s, apihttpstream.NoOpNewStreamHandler, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	client, err := wsmuxhttpstream.NewClientConnectionWithPings(c, 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	defer server.Close()

	// Pinging both ways, without an idle timeout: still alive after 500 ms.
	select {
	case <-client.CloseChan():
		t.Fatal("connection with keepalive pings died")
	case <-time.After(500 * time.Millisecond):
	}
	stats := wsmuxhttpstream.ForStreaming(client).Session().Stats()
	if stats.FramesOut == 0 {
		t.Fatal("no frames sent")
	}
	// The idle timeout counts only stream activity: pings do not reset it.
	start := time.Now()
	server.SetIdleTimeout(300 * time.Millisecond)
	select {
	case <-server.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("idle timeout never fired while pings flowed")
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("idle close after %v, before the 300 ms timeout", d)
	}
	select {
	case <-client.CloseChan():
	case <-time.After(5 * time.Second):
		t.Fatal("client not closed after the server's idle close")
	}
}
