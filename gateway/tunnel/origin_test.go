package tunnel

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/origin"
	"github.com/wsmux/wsmux/mux"
)

// TestTunnelOrigin: a tunnel upgrade from a web page of another origin is
// refused with 403 naming --allowed-origins, counted; without Origin (the
// wsmux CLI), from the server's own origin and from an allowed one it
// opens. Before, every Origin opened a session.
func TestTunnelOrigin(t *testing.T) {
	pol, err := origin.Parse([]string{"https://console.example"})
	if err != nil {
		t.Fatal(err)
	}
	echo := echoServer(t)
	srv, err := NewServer(ServerConfig{Allow: []string{echo}, Auth: auth.New([]string{testToken}, nil), Origins: pol, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	defer func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Metrics().Sessions.Drain(ctx)
		srv.Wait()
	}()
	refused := 0
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{"", true},
		{hs.URL, true},
		{"https://console.example", true},
		{"https://evil.example", false},
		{"null", false},
		{"https" + strings.TrimPrefix(hs.URL, "http"), false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			h := http.Header{"Authorization": {"Bearer " + testToken}}
			if tc.origin != "" {
				h.Set("Origin", tc.origin)
			}
			s, err := (&mux.Dialer{Header: h}).Dial(context.Background(), wsURL(t, hs.URL))
			if tc.ok {
				if err != nil {
					t.Fatal(err)
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("upgraded")
			}
			refused++
			var he *mux.HandshakeError
			if !errors.As(err, &he) || he.StatusCode != http.StatusForbidden || !strings.Contains(string(he.Body), "--allowed-origins") {
				t.Fatalf("%v, want a 403 naming --allowed-origins", err)
			}
		})
	}
	if v := ops.Value(srv.Metrics().BadRequests.WithLabelValues("cross_origin")); v != float64(refused) {
		t.Errorf("cross_origin refusals counted %v, want %d", v, refused)
	}
}
