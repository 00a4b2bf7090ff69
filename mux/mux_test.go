package mux

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
)

func TestMain(m *testing.M) {
	leadHook = watchedLeadHook // before any session starts: no race
	leakcheck.VerifyTestMain(m)
}

// pipePair starts a client and a server session over net.Pipe.
func pipePair(t testing.TB, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
	a, b := net.Pipe()
	return sessionsOver(t, a, b, ccfg, scfg)
}

// sessionsOver starts a client session on a and a server session on b,
// both closed when the test ends.
func sessionsOver(t testing.TB, a, b net.Conn, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
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

func TestOpenAcceptHeaders(t *testing.T) {
	cs, ss := pipePair(t, nil, nil)
	ctx := context.Background()
	done := make(chan *Stream, 1)
	go func() {
		st, err := ss.AcceptStream(ctx)
		if err != nil {
			done <- nil
			return
		}
		done <- st
	}()
	st, err := cs.Open(ctx, http.Header{"Streamtype": {"data"}, "X-Custom": {"a", "b"}})
	require.NoError(t, err)
	require.Equal(t, uint32(1), st.ID())
	peer := <-done
	require.NotNil(t, peer)
	require.Equal(t, "data", peer.Headers().Get("Streamtype"))
	require.Equal(t, []string{"a", "b"}, peer.Headers()["X-Custom"])

	_, err = st.Write([]byte("hello"))
	require.NoError(t, err)
	require.NoError(t, st.CloseWrite())
	got, err := io.ReadAll(peer)
	require.NoError(t, err)
	require.Equal(t, "hello", string(got))
	_, err = peer.Write([]byte("world"))
	require.NoError(t, err)
	require.NoError(t, peer.Close())
	got, err = io.ReadAll(st)
	require.NoError(t, err)
	require.Equal(t, "world", string(got))

	// Server-opened stream: even id.
	go func() {
		st, _ := cs.AcceptStream(ctx)
		done <- st
	}()
	st2, err := ss.Open(ctx, nil)
	require.NoError(t, err)
	require.Equal(t, uint32(2), st2.ID())
	p2 := <-done
	require.NotNil(t, p2)
	require.Equal(t, uint32(2), p2.ID())
}

// echoServer accepts streams and echoes each back, then half-closes.
func echoServer(s *Session) {
	for {
		st, err := s.AcceptStream(context.Background())
		if err != nil {
			return
		}
		go func() {
			_, _ = io.Copy(st, st)
			_ = st.Close()
		}()
	}
}

func exchange(t testing.TB, s *Session, streams, size int) {
	var wg sync.WaitGroup
	errs := make(chan error, streams)
	for i := 0; i < streams; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.Open(context.Background(), nil)
			if err != nil {
				errs <- err
				return
			}
			data := make([]byte, size)
			_, _ = rand.Read(data)
			want := sha256.Sum256(data)
			go func() {
				_, _ = st.Write(data)
				_ = st.CloseWrite()
			}()
			h := sha256.New()
			n, err := io.Copy(h, st)
			if err != nil {
				errs <- err
				return
			}
			if n != int64(size) || !bytes.Equal(h.Sum(nil), want[:]) {
				errs <- errors.New("echo mismatch")
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestEchoPipe(t *testing.T) {
	small := &Config{MaxFramePayload: 4096, InitialStreamWindow: 8 << 10, MaxStreamWindow: 8 << 10,
		InitialSessionWindow: 64 << 10, MaxSessionWindow: 64 << 10, MaxBatch: 8 << 10, MaxMessageSize: 64 << 10,
		StreamSendBuffer: 4 << 10, SessionSendBuffer: 16 << 10}
	tests := []struct {
		name       string
		ccfg, scfg *Config
	}{
		{"defaults", nil, nil},
		{"small frames and windows", small, small},
		{"small server, default client", nil, small},
		{"small client, default server", small, nil},
		{"large frames", &Config{MaxFramePayload: 65535, MaxBatch: 1 << 20}, &Config{MaxFramePayload: 65535}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cs, ss := pipePair(t, tt.ccfg, tt.scfg)
			go echoServer(ss)
			exchange(t, cs, 16, 1<<20)
		})
	}
}

var _ = frame.NoError

// elapse lets d of fake time pass; only inside a testing/synctest bubble,
// where the clock moves only once every goroutine of the bubble is durably
// blocked, so what follows sees everything that d of quiet brings about
// (timers fired, their effects done). Outside a bubble it would wait on the
// real clock: mux tests never call it there.
func elapse(d time.Duration) { <-time.After(d) }
