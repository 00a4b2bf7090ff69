package mux

import (
	"context"
	"io"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// tcpPair starts a client and a server session over loopback TCP (no HTTP
// handshake: the sessions speak WebSocket frames straight away).
func tcpPair(t testing.TB, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
	a, b := tcpConns(t)
	cs, err := Client(a, ccfg)
	require.NoError(t, err)
	ss, err := Server(b, scfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
	})
	return cs, ss
}

// fastPaths returns a copy of cfg (nil: the defaults) that asks for
// DriverFastPaths, for tests of the fast paths themselves, which must run
// whatever driver WSMUX_DRIVER selects for the rest.
func fastPaths(cfg *Config) *Config {
	c := cfg.withDefaults()
	c.Driver = DriverFastPaths
	return c
}

// openPair opens a stream from a and accepts it on b.
func openPair(t testing.TB, a, b *Session) (*Stream, *Stream) {
	t.Helper()
	acc := acceptOne(b)
	st, err := a.Open(context.Background(), nil)
	require.NoError(t, err)
	peer := <-acc
	require.NotNil(t, peer)
	return st, peer
}

func TestZeroAllocsSteadyState(t *testing.T) {
	if testing.CoverMode() != "" || raceEnabled {
		t.Skip("coverage and the race detector allocate (sync.Pool drops items under -race)")
	}
	for _, role := range []string{"client writes", "server writes"} {
		t.Run(role, func(t *testing.T) {
			cs, ss := tcpPair(t, nil, nil)
			w, r := openPair(t, cs, ss)
			if role == "server writes" {
				r, w = w, r
			}
			msg := make([]byte, 16<<10)
			buf := make([]byte, 16<<10)
			step := func() {
				if _, err := w.Write(msg); err != nil {
					panic(err)
				}
				if _, err := io.ReadFull(r, buf); err != nil {
					panic(err)
				}
			}
			for i := 0; i < 2000; i++ { // warm the pools and the windows up
				step()
			}
			allocs := testing.AllocsPerRun(2000, step)
			require.Zero(t, allocs, "allocations per 16 KiB Write+Read")
		})
	}
}
