package httpstream_test

import (
	"net"
	"testing"

	"github.com/wsmux/wsmux/adapters/internal/conformance"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// tcpPair returns the two ends of one loopback TCP connection.
func tcpPair(t testing.TB) (client, server net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	type res struct {
		c   net.Conn
		err error
	}
	ch := make(chan res, 1)
	go func() { c, err := ln.Accept(); ch <- res{c, err} }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	t.Cleanup(func() { client.Close(); r.c.Close() })
	return client, r.c
}

func spdyFactory(t testing.TB, h k8shttpstream.NewStreamHandler) (k8shttpstream.Connection, k8shttpstream.Connection) {
	c, s := tcpPair(t)
	server, err := spdy.NewServerConnection(s, h)
	if err != nil {
		t.Fatal(err)
	}
	client, err := spdy.NewClientConnection(c)
	if err != nil {
		t.Fatal(err)
	}
	return client, server
}

func TestConformanceSPDY(t *testing.T) {
	conformance.RunAndReport(t, "spdy", spdyFactory, conformance.SPDYKnown)
}
