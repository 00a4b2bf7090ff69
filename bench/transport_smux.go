package bench

import (
	"errors"
	"io"
	"testing"

	"github.com/xtaci/smux"
)

// smux: github.com/xtaci/smux v1.5.58, DefaultConfig with Version 2 (per-stream
// flow control; version 1, the default, has a single session-wide receive
// buffer and stalls every stream when one is not read). CloseWrite is smux's
// CloseWrite (FIN, read side stays open); Close closes both directions (smux
// reports io.ErrClosedPipe when the stream is already gone after both sides
// half-closed; that is not an error here).

func init() {
	Register(Transport{
		Name:        "smux",
		Multiplexed: true,
		Description: "xtaci/smux v1.5.58, DefaultConfig with protocol Version 2",
		Pair:        smuxPair,
	})
}

type smuxSession struct{ s *smux.Session }

type smuxStream struct{ *smux.Stream }

func (s smuxStream) Close() error {
	if err := s.Stream.Close(); err != nil && !errors.Is(err, io.ErrClosedPipe) {
		return err
	}
	return nil
}

func (s smuxSession) Open() (Stream, error) {
	st, err := s.s.OpenStream()
	if err != nil {
		return nil, err
	}
	return smuxStream{st}, nil
}

func (s smuxSession) Accept() (Stream, error) {
	st, err := s.s.AcceptStream()
	if err != nil {
		return nil, err
	}
	return smuxStream{st}, nil
}

func (s smuxSession) Close() error { return s.s.Close() }

func smuxPair(tb testing.TB, n Net) (client, server Session, cleanup func()) {
	conns := newConnSet()
	cc, sc := n.wire(tb, conns).pair(tb)
	cfg := smux.DefaultConfig()
	cfg.Version = 2
	cs, err := smux.Client(cc, cfg)
	if err != nil {
		conns.closeAll()
		mustf(tb, err, "smux client")
	}
	ss, err := smux.Server(sc, cfg)
	if err != nil {
		cs.Close()
		conns.closeAll()
		mustf(tb, err, "smux server")
	}
	return smuxSession{cs}, smuxSession{ss}, muxCleanup(tb, "smux", conns, cs.Close, ss.Close)
}
