package bench

import (
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	pfconst "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
)

// spdy: the transport under kubectl exec/attach/port-forward today:
// k8s.io/streaming v0.37.2 pkg/httpstream/spdy (github.com/moby/spdystream
// v0.5.1) over one loopback TCP connection, used the way port-forward uses it
// (see transport_httpstream.go). The client is NewClientConnectionWithPings
// (5 s, as client-go's SPDY round tripper); CreateStream returns after the
// server's SYN_REPLY. The server is NewServerConnection.
//
// CloseWrite is SPDY's Close (an empty DATA frame with FIN: a half-close).
// Close sends that FIN if not sent yet and then calls RemoveStreams on the
// connection; spdystream forgets the stream once both sides have sent FIN.
//
// spdy-over-ws: the same SPDY session tunnelled through WebSocket the way
// kubectl port-forward does it since KEP-4006, driven in-process with
// client-go's own tunnelling code. The client does what client-go's
// SPDY-over-WebSocket dialer (tools/portforward tunneling_dialer.go) does: a
// gorilla/websocket Dialer with the buffer sizes of client-go's WebSocket round
// tripper (32 KiB + 1 KiB) offering SPDY/3.1+portforward.k8s.io, client-go's
// portforward.TunnelingConnection over it and spdy.NewClientConnectionWithPings
// (portforward.PingPeriod, 10 s). It builds those pieces itself instead of
// calling the dialer only to keep hold of the connection it tunnels through,
// for a deterministic teardown; the data path is the same. The server does what
// the apiserver's TunnelingHandler does with the client's side (a
// gorilla/websocket Upgrader with default buffers and a TunnelingConnection),
// but instead of proxying the SPDY bytes on to a kubelet (k8s.io/apiserver is
// not a dependency here) it terminates them with spdy.NewServerConnection.
// Every WebSocket message carries one Write of the SPDY framer, which writes a
// data frame as three Writes.

func init() {
	Register(Transport{
		Name:        "spdy",
		Multiplexed: true,
		Description: "k8s.io/streaming v0.37.2 httpstream/spdy (moby/spdystream v0.5.1) over TCP, port-forward headers, RemoveStreams on close",
		Pair:        spdyPair,
	})
	Register(Transport{
		Name:        "spdy-over-ws",
		Multiplexed: true,
		Description: "the spdy transport tunnelled in WebSocket messages with client-go v0.37.2 portforward.TunnelingConnection on gorilla/websocket (kubectl port-forward since KEP-4006)",
		Pair:        spdyOverWSPair,
	})
}

// spdyClientPingPeriod is the ping period client-go's SPDY round tripper uses.
const spdyClientPingPeriod = 5 * time.Second

// spdyNetConn is the net.Conn a SPDY connection runs on. spdystream closes it
// at the end of its shutdown and, if that Close fails (because the harness
// closed the connection first), keeps a goroutine around for a second to
// report the error to nobody; so Close here never fails, and it tells the
// cleanup when spdystream has called it.
type spdyNetConn struct {
	net.Conn
	once       sync.Once
	spdyClosed chan struct{}
	spdyOnce   sync.Once
}

func newSPDYNetConn(c net.Conn) *spdyNetConn {
	return &spdyNetConn{Conn: c, spdyClosed: make(chan struct{})}
}

// Close is called by spdystream.
func (c *spdyNetConn) Close() error {
	c.forceClose()
	c.spdyOnce.Do(func() { close(c.spdyClosed) })
	return nil
}

// forceClose is called by the cleanup.
func (c *spdyNetConn) forceClose() {
	c.once.Do(func() { c.Conn.Close() })
}

// spdyCleanup tears a SPDY pair down: it closes both connections, bounded
// (Close blocks while the peer does not read), closes the underlying
// connections if the graceful close did not finish (or right away when
// it did: that is a no-op then), and waits for both read loops and both
// shutdowns.
func spdyCleanup(tb testing.TB, name string, done chan struct{}, cconn, sconn httpstream.Connection, cnet, snet *spdyNetConn, extra *connSet, after func()) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			var closing sync.WaitGroup
			graceful := closeBounded(time.Second, &closing, cconn.Close, sconn.Close)
			if graceful {
				// Both GOAWAYs are out; give the read loops and the
				// shutdowns a moment to finish on their own.
				t := time.NewTimer(time.Second)
				for _, ch := range []<-chan struct{}{cnet.spdyClosed, snet.spdyClosed} {
					select {
					case <-ch:
					case <-t.C:
					}
				}
				t.Stop()
			}
			cnet.forceClose()
			snet.forceClose()
			if extra != nil {
				extra.closeAll()
			}
			if !waitTimeout(&closing, 10*time.Second) {
				tb.Errorf("bench: %s: Connection.Close still blocked 10 s after its connection was closed", name)
			}
			if after != nil {
				after()
			}
			t := time.NewTimer(10 * time.Second)
			defer t.Stop()
			for _, ch := range []<-chan struct{}{cnet.spdyClosed, snet.spdyClosed} {
				select {
				case <-ch:
				case <-t.C:
					tb.Errorf("bench: %s: SPDY shutdown not finished 10 s after cleanup", name)
					return
				}
			}
			for _, c := range []httpstream.Connection{cconn, sconn} {
				select {
				case <-c.CloseChan():
				case <-t.C:
					tb.Errorf("bench: %s: SPDY read loop still running 10 s after cleanup", name)
					return
				}
			}
		})
	}
}

func spdyPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	conns := newConnSet()
	cc, sc := n.wire(tb, conns).pair(tb)
	cnet, snet := newSPDYNetConn(cc), newSPDYNetConn(sc)
	done := make(chan struct{})
	ss := newHTTPStreamServer(done)
	sconn, err := spdy.NewServerConnection(snet, ss.handler)
	if err != nil {
		conns.closeAll()
		mustf(tb, err, "spdy server")
	}
	ss.conn = sconn
	cconn, err := spdy.NewClientConnectionWithPings(cnet, spdyClientPingPeriod)
	if err != nil {
		sconn.Close()
		conns.closeAll()
		mustf(tb, err, "spdy client")
	}
	cs := newHTTPStreamClient(cconn, done)
	return cs, ss, spdyCleanup(tb, "spdy", done, cconn, sconn, cnet, snet, conns, nil)
}

// trackingListener adds every accepted connection to a connSet.
type trackingListener struct {
	net.Listener
	conns *connSet
}

func (l trackingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err == nil {
		l.conns.add(c)
	}
	return c, err
}

// clientGoWSBuffer is the read and write buffer size of client-go's WebSocket
// round tripper (transport/websocket: DataBufferSize() + 1024).
const clientGoWSBuffer = 32<<10 + 1024

func spdyOverWSPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	conns := newConnSet()
	w := n.wire(tb, conns)
	ln := w.listen(tb)
	done := make(chan struct{})
	ss := newHTTPStreamServer(done)
	type result struct {
		conn httpstream.Connection
		net  *spdyNetConn
		err  error
	}
	upgraded := make(chan result, 1)
	upgrader := gwebsocket.Upgrader{
		Subprotocols: []string{pfconst.WebsocketsSPDYTunnelingPortForwardV1},
		CheckOrigin:  func(*http.Request) bool { return true },
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			wsc, err := upgrader.Upgrade(w, r, nil)
			if err != nil {
				upgraded <- result{err: err}
				return
			}
			snet := newSPDYNetConn(portforward.NewTunnelingConnection("server", wsc))
			sconn, err := spdy.NewServerConnection(snet, ss.handler)
			upgraded <- result{sconn, snet, err}
		}),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	var serving sync.WaitGroup
	serving.Add(1)
	go func() {
		defer serving.Done()
		srv.Serve(ln)
	}()
	stopServer := func() {
		srv.Close()
		conns.closeAll()
		serving.Wait()
	}

	dialer := gwebsocket.Dialer{
		Subprotocols:     []string{pfconst.WebsocketsSPDYTunnelingPortForwardV1},
		ReadBufferSize:   clientGoWSBuffer,
		WriteBufferSize:  clientGoWSBuffer,
		HandshakeTimeout: 10 * time.Second,
		NetDialContext:   w.dial,
		TLSClientConfig:  w.clientTLS(),
	}
	u := w.scheme("ws", "wss") + "://" + ln.Addr().String() + "/api/v1/namespaces/default/pods/bench/portforward"
	wsc, resp, err := dialer.Dial(u, nil)
	if resp != nil && resp.Body != nil {
		resp.Body.Close()
	}
	if err != nil {
		stopServer()
		mustf(tb, err, "spdy-over-ws: WebSocket dial")
	}
	r := <-upgraded
	if r.err != nil {
		wsc.Close()
		stopServer()
		mustf(tb, r.err, "spdy-over-ws: server")
	}
	if p := wsc.Subprotocol(); p != pfconst.WebsocketsSPDYTunnelingPortForwardV1 {
		wsc.Close()
		r.conn.Close()
		stopServer()
		tb.Fatalf("bench: spdy-over-ws: negotiated %q", p)
	}
	cnet := newSPDYNetConn(portforward.NewTunnelingConnection("client", wsc))
	cconn, err := spdy.NewClientConnectionWithPings(cnet, portforward.PingPeriod)
	if err != nil {
		r.conn.Close()
		stopServer()
		mustf(tb, err, "spdy-over-ws: SPDY client")
	}
	ss.conn = r.conn
	cs := newHTTPStreamClient(cconn, done)
	return cs, ss, spdyCleanup(tb, "spdy-over-ws", done, cconn, r.conn, cnet, r.net, conns, func() {
		srv.Close()
		serving.Wait()
	})
}
