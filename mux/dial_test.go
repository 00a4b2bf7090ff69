package mux

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
)

// upgradeServer serves WSMUX/1 echo sessions.
func upgradeServer(t testing.TB, cfg *Config) *httptest.Server {
	var wg sync.WaitGroup
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, cfg)
		if err != nil {
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.Close()
			echoServer(s)
		}()
	}))
	t.Cleanup(func() {
		srv.Close()
		wg.Wait()
	})
	return srv
}

func wsURL(srv *httptest.Server) string { return "ws" + strings.TrimPrefix(srv.URL, "http") }

func TestDialUpgradeEcho(t *testing.T) {
	srv := upgradeServer(t, nil)
	s, err := Dial(context.Background(), wsURL(srv), nil)
	require.NoError(t, err)
	defer s.Close()
	exchange(t, s, 16, 1<<20)
	require.NoError(t, s.Close())
	require.ErrorIs(t, s.Err(), ErrSessionClosed)
}

func TestDialNotWsmux(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "forbidden", http.StatusForbidden)
	}))
	defer srv.Close()
	d := &Dialer{Header: http.Header{"X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}}
	_, err := d.Dial(context.Background(), wsURL(srv))
	var he *HandshakeError
	require.True(t, errors.As(err, &he), "got %v", err)
	require.Equal(t, http.StatusForbidden, he.StatusCode)
}

// UpgradeHeader is the 101's headers (those the handler set before
// Upgrade among them) on the dialled session, nil on the server's.
func TestDialUpgradeHeader(t *testing.T) {
	srvSess := make(chan *Session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Stream-Protocol-Version", "v5.channel.k8s.io")
		s, err := Upgrade(w, r, nil)
		if err != nil {
			return
		}
		srvSess <- s
	}))
	defer srv.Close()
	s, err := Dial(context.Background(), wsURL(srv), nil)
	require.NoError(t, err)
	defer s.Close()
	require.Equal(t, "v5.channel.k8s.io", s.UpgradeHeader().Get("X-Stream-Protocol-Version"))
	ss := <-srvSess
	defer ss.Close()
	require.Nil(t, ss.UpgradeHeader())
}
