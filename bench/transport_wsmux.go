package bench

import (
	"context"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/mux"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// wsmux: our multiplexer, set up the way a user sets it up. The server is
// an http.Server on 127.0.0.1 whose handler calls mux.Upgrade; the client is
// mux.Dialer.Dial to ws://127.0.0.1:port/. Both ends run over that one
// loopback TCP connection (the hijacked one on the server side).
// Config is the default except the stream limits: MaxStreams and
// AcceptBacklog are raised to wsmuxMaxStreams so that Streams1024 and
// IdleStreams (10,001 streams at once) run as for the other multiplexers,
// and CloseTimeout is 5 s (the cleanup does not depend on it).
//
// Open is Session.OpenEarly without headers: the optimistic open, whose
// DATA may follow the HEADERS SYN at once (it waits only for the peer's
// SETTINGS and stream credit). Accept is Session.AcceptStream. Streams are
// *mux.Stream: CloseWrite sends FIN and keeps reading; Close is the same
// half-close (the stream is gone once both sides sent FIN).
//
// wsmux-httpstream: the same multiplexer through adapters/httpstream as
// Kubernetes uses it: the server answers the upgrade with the adapter's
// ResponseUpgrader (as the kubelet's streaming server does) and its
// NewStreamHandler hands streams to Accept like port-forward's; the client
// is the adapter's RoundTripper (RoundTrip, then NewConnection, as
// client-go's SPDY dialer does) with a 5 s ping period like the spdy
// transport. CreateStream carries the port-forward headers and waits for the
// server's acceptance (the HEADERS ACK), as Kubernetes requires; Close is the
// half-close plus RemoveStreams (see transport_httpstream.go).

// wsmuxMaxStreams is the stream limit of both wsmux transports' sessions.
const wsmuxMaxStreams = 1 << 15

func init() {
	Register(Transport{
		Name:        "wsmux",
		Multiplexed: true,
		Description: "github.com/wsmux/wsmux/mux over one WebSocket (mux.Dial / mux.Upgrade), default Config with MaxStreams 32768, optimistic open (OpenEarly)",
		MaxStreams:  wsmuxMaxStreams,
		Pair:        wsmuxPair,
	})
	Register(Transport{
		Name:        "wsmux-httpstream",
		Multiplexed: true,
		Description: "wsmux through adapters/httpstream (RoundTripper + ResponseUpgrader), port-forward headers, CreateStream waits for the ACK, RemoveStreams on close",
		MaxStreams:  wsmuxMaxStreams,
		Pair:        wsmuxHTTPStreamPair,
	})
}

// wsmuxConfig is the session configuration of both wsmux transports.
func wsmuxConfig() *mux.Config {
	return &mux.Config{
		MaxStreams:    wsmuxMaxStreams,
		AcceptBacklog: wsmuxMaxStreams,
		CloseTimeout:  5 * time.Second,
	}
}

type wsmuxSession struct{ s *mux.Session }

func (s wsmuxSession) Open() (Stream, error) {
	st, err := s.s.OpenEarly(nil)
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (s wsmuxSession) Accept() (Stream, error) {
	st, err := s.s.AcceptStream(context.Background())
	if err != nil {
		return nil, err
	}
	return st, nil
}

func (s wsmuxSession) Close() error { return s.s.Close() }

// upgradeServer is an http.Server on a loopback listener whose connections
// are tracked in conns; upgrade runs in its handler and its result is passed
// to the goroutine that set the server up. It serves one upgrade.
type upgradeServer struct {
	srv     *http.Server
	ln      net.Listener
	wire    *wire
	serving sync.WaitGroup
	result  chan error
}

func startUpgradeServer(tb testing.TB, wr *wire, upgrade func(w http.ResponseWriter, r *http.Request) error) *upgradeServer {
	u := &upgradeServer{ln: wr.listen(tb), wire: wr, result: make(chan error, 1)}
	var once sync.Once
	u.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served := false
			once.Do(func() {
				served = true
				u.result <- upgrade(w, r)
			})
			if !served {
				http.Error(w, "bench: one upgrade per server", http.StatusConflict)
			}
		}),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	u.serving.Add(1)
	go func() {
		defer u.serving.Done()
		u.srv.Serve(u.ln)
	}()
	return u
}

// url is the server's ws:// or, with TLS, wss:// URL.
func (u *upgradeServer) url() string {
	return u.wire.scheme("ws", "wss") + "://" + u.ln.Addr().String() + "/"
}

// wait returns the handler's result once the client's handshake is done
// (bounded), then stops the server: the hijacked connection stays open.
func (u *upgradeServer) wait() error {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	var err error
	select {
	case err = <-u.result:
	case <-t.C:
		err = context.DeadlineExceeded
	}
	u.stop()
	return err
}

func (u *upgradeServer) stop() {
	u.srv.Close()
	u.serving.Wait()
}

func wsmuxPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	return wsmuxPairWith(tb, n, "wsmux", wsmuxConfig)
}

// wsmuxPairWith is a wsmux Pair whose sessions have cfg's Config.
func wsmuxPairWith(tb testing.TB, n Net, name string, cfg func() *mux.Config) (client, server Session, cleanup func()) {
	conns := newConnSet()
	wr := n.wire(tb, conns)
	var ss *mux.Session
	u := startUpgradeServer(tb, wr, func(w http.ResponseWriter, r *http.Request) error {
		s, err := mux.Upgrade(w, r, cfg())
		ss = s
		return err
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d := mux.Dialer{Config: cfg(), NetDial: wr.dial, TLSConfig: wr.clientTLS()}
	cs, err := d.Dial(ctx, u.url())
	if err != nil {
		conns.closeAll()
		u.stop()
		mustf(tb, err, "%s: dial", name)
	}
	if err := u.wait(); err != nil {
		conns.closeAll()
		cs.Close()
		mustf(tb, err, "%s: upgrade", name)
	}
	return wsmuxSession{cs}, wsmuxSession{ss}, muxCleanup(tb, name, conns, cs.Close, ss.Close)
}

// wsmuxHTTPStreamPingPeriod is the client's keepalive, as for the spdy
// transport (client-go's SPDY round tripper pings every 5 s).
const wsmuxHTTPStreamPingPeriod = 5 * time.Second

func wsmuxHTTPStreamPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	return wsmuxHTTPStreamPairWith(tb, n, "wsmux-httpstream", wsmuxConfig)
}

// wsmuxHTTPStreamPairWith is a wsmux-httpstream Pair whose sessions have
// cfg's Config.
func wsmuxHTTPStreamPairWith(tb testing.TB, n Net, name string, cfg func() *mux.Config) (client, server Session, cleanup func()) {
	conns := newConnSet()
	wr := n.wire(tb, conns)
	done := make(chan struct{})
	ss := newHTTPStreamServer(done)
	upgrader := httpstream.NewResponseUpgraderWithConfig(cfg())
	u := startUpgradeServer(tb, wr, func(w http.ResponseWriter, r *http.Request) error {
		sconn := upgrader.UpgradeResponse(w, r, ss.handler)
		if sconn == nil {
			return errUpgradeFailed
		}
		ss.conn = sconn
		return nil
	})
	rt, err := httpstream.NewRoundTripperWithConfig(httpstream.RoundTripperConfig{
		UpgradeTransport: &http.Transport{DialContext: wr.dial, TLSClientConfig: wr.clientTLS()},
		PingPeriod:       wsmuxHTTPStreamPingPeriod,
		Config:           cfg(),
	})
	if err != nil {
		u.stop()
		mustf(tb, err, "%s: round tripper", name)
	}
	req, err := http.NewRequest(http.MethodPost, wr.scheme("http", "https")+"://"+u.ln.Addr().String()+"/api/v1/namespaces/default/pods/bench/portforward", nil)
	mustf(tb, err, "%s: request", name)
	fail := func(err error, what string) {
		conns.closeAll()
		u.stop()
		mustf(tb, err, "%s: %s", name, what)
	}
	resp, err := rt.RoundTrip(req)
	if err != nil {
		fail(err, "round trip")
	}
	cconn, err := rt.ForStreaming().NewConnection(resp)
	if err != nil {
		fail(err, "client connection")
	}
	if err := u.wait(); err != nil {
		cconn.Close()
		conns.closeAll()
		mustf(tb, err, "%s: upgrade", name)
	}
	cs := newHTTPStreamClient(cconn, done)
	sconn := ss.conn
	var closeDone sync.Once
	closers := []func() error{cconn.Close, sconn.Close}
	inner := muxCleanup(tb, name, conns, closers...)
	return cs, ss, func() {
		closeDone.Do(func() { close(done) })
		inner()
		waitClosed(tb, name, cconn, sconn)
	}
}

var errUpgradeFailed = errors.New("bench: the response upgrader refused the request")

// waitClosed waits (bounded) for the connections' CloseChan, which the
// adapter closes from a goroutine of its own.
func waitClosed(tb testing.TB, name string, conns ...k8shttpstream.Connection) {
	t := time.NewTimer(10 * time.Second)
	defer t.Stop()
	for _, c := range conns {
		select {
		case <-c.CloseChan():
		case <-t.C:
			tb.Errorf("bench: %s: connection not closed 10 s after cleanup", name)
			return
		}
	}
}
