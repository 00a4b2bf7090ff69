package bench

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/loopback"
)

// Net is what lies between a Pair's client and server: loopback TCP, plus,
// optionally, TLS over it and an emulated WAN link under it. Every
// transport takes the same Net, so a workload compares them over the same
// network.
//
// With TLS, the WebSocket transports dial wss:// (or https:// for the
// upgrade of the httpstream adapter) with their own TLS client, the others
// run over a tls.Conn; both ends use tlsServerConfig and tlsClientConfig:
// TLS 1.3, X25519, one ECDSA P-256 certificate, so every transport
// negotiates the same suite (TLS_AES_128_GCM_SHA256 where the CPU has AES
// instructions).
//
// With a Link, every TCP connection of the Pair goes through one Link (one
// emulated path between two hosts, its bandwidth shared).
type Net struct {
	TLS  bool
	Link *LinkConfig
}

// String names the network in workload variants: "tls", "rtt=80ms_...".
func (n Net) String() string {
	s := ""
	if n.Link != nil {
		s = n.Link.String()
	}
	if n.TLS {
		if s != "" {
			s += "_"
		}
		s += "tls"
	}
	return s
}

// wire is a Net set up for one Pair: its connections are tracked in conns,
// its relays end when conns are closed.
type wire struct {
	n     Net
	conns *connSet
	link  *Link
}

func (n Net) wire(tb testing.TB, conns *connSet) *wire {
	tb.Helper()
	w := &wire{n: n, conns: conns}
	if n.Link != nil {
		l, err := NewLink(*n.Link)
		mustf(tb, err, "link")
		w.link = l
	}
	return w
}

// relay puts the link between c (a connection to the server) and a new
// loopback connection whose far end it returns.
func (w *wire) relay(c net.Conn) (net.Conn, error) {
	if w.link == nil {
		return c, nil
	}
	near, far, err := loopback.Pair()
	if err != nil {
		return nil, err
	}
	if !w.conns.add(near) || !w.conns.add(far) {
		return nil, net.ErrClosed
	}
	w.link.Connect(far, c)
	return near, nil
}

// dial opens a TCP connection to addr through the link (no TLS: the
// WebSocket dialers add their own).
func (w *wire) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	if !w.conns.add(c) {
		return nil, net.ErrClosed
	}
	return w.relay(c)
}

// dialTLS is dial plus the TLS client handshake when the Net has TLS.
func (w *wire) dialTLS(ctx context.Context, addr string) (net.Conn, error) {
	c, err := w.dial(ctx, "tcp", addr)
	if err != nil || !w.n.TLS {
		return c, err
	}
	tc := tls.Client(c, tlsClientConfig())
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, err
	}
	return tc, nil
}

// listen opens a loopback listener whose accepted connections are tracked,
// serving TLS when the Net has it.
func (w *wire) listen(tb testing.TB) net.Listener {
	tb.Helper()
	var ln net.Listener = trackingListener{listen(tb), w.conns}
	if w.n.TLS {
		ln = tls.NewListener(ln, tlsServerConfig())
	}
	return ln
}

// scheme returns plain or, with TLS, secure ("ws" or "wss", "http" or "https").
func (w *wire) scheme(plain, secure string) string {
	if w.n.TLS {
		return secure
	}
	return plain
}

// clientTLS is the TLS client configuration with TLS, nil without.
func (w *wire) clientTLS() *tls.Config {
	if !w.n.TLS {
		return nil
	}
	return tlsClientConfig()
}

// pair returns both ends of one connection through the link, with the TLS
// handshake done when the Net has TLS, the client end first.
func (w *wire) pair(tb testing.TB) (client, server net.Conn) {
	tb.Helper()
	client, server = tcpPair(tb, w.conns)
	if w.link != nil {
		far, err := w.relay(server)
		mustf(tb, err, "link")
		server = far
	}
	if !w.n.TLS {
		return client, server
	}
	tc, ts := tls.Client(client, tlsClientConfig()), tls.Server(server, tlsServerConfig())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- ts.HandshakeContext(ctx) }()
	err := tc.HandshakeContext(ctx)
	if serr := <-errc; err == nil {
		err = serr
	}
	if err != nil {
		w.conns.closeAll()
		mustf(tb, err, "TLS handshake")
	}
	return tc, ts
}

// tlsHandshakes counts the client handshakes done with tlsClientConfig, and
// tlsSuite holds the suite of the last one: the smoke test checks that
// every transport runs its TLS workloads over TLS, with the same suite.
var (
	tlsHandshakes atomic.Int64
	tlsSuite      atomic.Uint32
)

var tlsCert = sync.OnceValues(func() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "wsmux bench"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, nil
})

func mustCert() tls.Certificate {
	c, err := tlsCert()
	if err != nil {
		panic("bench: self-signed certificate: " + err.Error())
	}
	return c
}

func tlsServerConfig() *tls.Config {
	return &tls.Config{
		Certificates:     []tls.Certificate{mustCert()},
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
		NextProtos:       []string{"http/1.1"},
	}
}

func tlsClientConfig() *tls.Config {
	roots := x509.NewCertPool()
	roots.AddCert(mustCert().Leaf)
	return &tls.Config{
		RootCAs:          roots,
		ServerName:       "127.0.0.1",
		MinVersion:       tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519},
		VerifyConnection: func(cs tls.ConnectionState) error {
			tlsHandshakes.Add(1)
			tlsSuite.Store(uint32(cs.CipherSuite))
			return nil
		},
	}
}
