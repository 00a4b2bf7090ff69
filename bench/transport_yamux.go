package bench

import (
	"io"
	"testing"

	"github.com/hashicorp/yamux"
)

// yamux: github.com/hashicorp/yamux v0.1.2 with DefaultConfig (256 KiB stream
// window, keepalive every 30 s), logging discarded. yamux has no half-close of
// its own besides Close, which sends FIN and keeps the read side open; so
// CloseWrite and Close are both yamux's Close, and a stream is released once
// both sides have closed it.

func init() {
	Register(Transport{
		Name:        "yamux",
		Multiplexed: true,
		Description: "hashicorp/yamux v0.1.2, DefaultConfig",
		Pair:        yamuxPair,
	})
}

type yamuxSession struct{ s *yamux.Session }

type yamuxStream struct{ *yamux.Stream }

func (s yamuxStream) CloseWrite() error { return s.Stream.Close() }

func (s yamuxSession) Open() (Stream, error) {
	st, err := s.s.OpenStream()
	if err != nil {
		return nil, err
	}
	return yamuxStream{st}, nil
}

func (s yamuxSession) Accept() (Stream, error) {
	st, err := s.s.AcceptStream()
	if err != nil {
		return nil, err
	}
	return yamuxStream{st}, nil
}

func (s yamuxSession) Close() error { return s.s.Close() }

func yamuxPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	conns := newConnSet()
	cc, sc := n.wire(tb, conns).pair(tb)
	cfg := yamux.DefaultConfig()
	cfg.LogOutput = io.Discard
	cs, err := yamux.Client(cc, cfg)
	if err != nil {
		conns.closeAll()
		mustf(tb, err, "yamux client")
	}
	ss, err := yamux.Server(sc, cfg)
	if err != nil {
		cs.Close()
		conns.closeAll()
		mustf(tb, err, "yamux server")
	}
	return yamuxSession{cs}, yamuxSession{ss}, muxCleanup(tb, "yamux", conns, cs.Close, ss.Close)
}
