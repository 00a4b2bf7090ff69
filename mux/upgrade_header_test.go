package mux

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/internal/testkit/require"
	"github.com/wsmux/wsmux/internal/wshandshake"
)

// Headers a handler sets before Upgrade travel with the 101, as Kubernetes'
// httpstream.Handshake needs for X-Stream-Protocol-Version.
func TestUpgradeSendsHandlerHeaders(t *testing.T) {
	done := make(chan *Session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
		s, err := Upgrade(w, r, nil)
		if err != nil {
			t.Error(err)
			done <- nil
			return
		}
		done <- s
	}))
	defer srv.Close()

	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	conn, br, hdr, err := wshandshake.Dial(context.Background(), url, wshandshake.DialOptions{})
	require.NoError(t, err)
	require.Equal(t, "v4.channel.k8s.io", hdr.Get("X-Stream-Protocol-Version"))
	c, err := NewSession(conn, br, true, nil)
	require.NoError(t, err)
	s := <-done
	require.NotNil(t, s)
	require.NoError(t, c.Close())
	require.NoError(t, s.Close())
	<-c.Done()
	<-s.Done()
}
