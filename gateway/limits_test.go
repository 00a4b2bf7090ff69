package gateway

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
)

func startLimited(t *testing.T, lim ops.Limits, tokens ...string) (*Gateway, func(string) kubeclient.Options) {
	cl := clustertest.Start(t)
	g, err := New(Config{
		Auth:    auth.New(tokens, nil),
		Cluster: cl.RestConfig(),
		Limits:  lim,
		Logger:  slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, g)
	return g, func(tok string) kubeclient.Options { return kubeclient.Options{Server: srv.URL, Token: tok} }
}

const tokA, tokB = "token-of-caller-a", "token-of-caller-b"

// TestSessionLimitPerCaller: caller A holds its one session (a
// port-forward); its next session is refused with 429 naming the flag,
// while caller B's exec echoes as usual, using all four streams its
// session may have (counted).
func TestSessionLimitPerCaller(t *testing.T) {
	g, opts := startLimited(t, ops.Limits{SessionsPerCaller: 1, StreamsPerSession: 4, BufferPerCaller: 4 << 20}, tokA, tokB)
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- kubeclient.PortForward(ctx, opts(tokA), kubeclient.PortForwardOptions{
			Namespace: "default", Pod: "web-0", Ports: []string{"0:8080"}, Out: io.Discard, Err: io.Discard,
		}, func(*kubeclient.PortForwarder) { close(started) })
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatal(err)
	}
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	_, err := execCat(t, opts(tokA), []byte("a"))
	if !isStatus(err, http.StatusTooManyRequests, "--max-sessions-per-caller") {
		t.Fatalf("A's second session: %v, want 429 naming --max-sessions-per-caller", err)
	}
	data := bytes.Repeat([]byte("b"), 1<<20)
	got, err := execCat(t, opts(tokB), data)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("B's exec with A at its limit: %d bytes, %v", len(got), err)
	}
	// B's exec (stdin, stdout, stderr and error streams) used its
	// session's four streams.
	expectMetrics(t, g, `wsmux_limit_refusals_total{limit="sessions_per_caller"} 1`,
		`wsmux_limit_refusals_total{limit="streams_per_session"} 1`,
		`wsmux_limit{limit="streams_per_session"} 4`, `wsmux_limit{limit="buffer_bytes_per_caller"} 4.194304e+06`)
}

// TestDialRatePerCaller: caller B over its upstream dial rate is refused
// with 429 and Retry-After; caller A's exec, on its own budget, echoes.
func TestDialRatePerCaller(t *testing.T) {
	g, opts := startLimited(t, ops.Limits{DialsPerSecond: 0.001, DialBurst: 1}, tokA, tokB)
	data := bytes.Repeat([]byte("b"), 64<<10)
	if got, err := execCat(t, opts(tokB), data); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("B's first exec: %d bytes, %v", len(got), err)
	}
	_, err := execCat(t, opts(tokB), data)
	var ue *httpstream.UpgradeError
	if !isStatus(err, http.StatusTooManyRequests, "--max-dials-per-second") || !errors.As(err, &ue) || ue.Header.Get("Retry-After") == "" {
		t.Fatalf("B's second dial: %v, want 429 naming --max-dials-per-second with Retry-After", err)
	}
	if got, err := execCat(t, opts(tokA), data); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("A's exec with B at its limit: %d bytes, %v", len(got), err)
	}
	expectMetrics(t, g, `wsmux_limit_refusals_total{limit="dials_per_second"} 1`)
}

func expectMetrics(t *testing.T, g *Gateway, want ...string) {
	t.Helper()
	rec := httptest.NewRecorder()
	g.Metrics().Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, w := range want {
		if !strings.Contains(rec.Body.String(), w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
}

func isStatus(err error, status int, text string) bool {
	var ue *httpstream.UpgradeError
	return errors.As(err, &ue) && ue.StatusCode == status && strings.Contains(string(ue.Body), text)
}
