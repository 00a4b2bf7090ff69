package tunnel_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wsmux/wsmux/conformance"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/tunnel"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

const token = "conformance-token"

// TestConformanceTunnelServe runs against the handler of `wsmux tunnel
// serve`, with an allowed echo target and the bearer token.
func TestConformanceTunnelServe(t *testing.T) {
	target := testnet.Echo(t)
	srv, err := tunnel.NewServer(tunnel.ServerConfig{
		Allow:  []string{target},
		Auth:   auth.New([]string{token}, nil),
		Mux:    &mux.Config{MaxStreams: 1000},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Wait() })
	u, err := tunnel.WebSocketURL(hs.URL, tunnel.DefaultPath)
	if err != nil {
		t.Fatal(err)
	}
	o := conformance.Options{
		URL:          u,
		Header:       http.Header{"Authorization": {"Bearer " + token}},
		StreamHeader: http.Header{tunnel.TargetHeader: {target}},
		Echo:         true,
	}
	sum, report := runConformance(t, o)
	if sum.Fail > 0 || sum.Pass < 70 {
		t.Fatalf("%d failed, %d passed (want >= 70):\n%s", sum.Fail, sum.Pass, report)
	}

	// Without the token the run cannot start: that is an error, not a FAIL.
	o.Header = nil
	if _, err := conformance.Run(context.Background(), o); err == nil {
		t.Fatal("a run without credentials succeeded")
	}
}

// runConformance runs the WSMUX/1 conformance checks of o and returns
// their summary and report.
func runConformance(t *testing.T, o conformance.Options) (*conformance.Summary, string) {
	t.Helper()
	var out bytes.Buffer
	o.Out = &out
	o.Timeout = 10 * time.Second
	sum, err := conformance.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	return sum, out.String()
}
