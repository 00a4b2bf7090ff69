package tunnel

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// TestLimitsPerCaller: one caller (token A) at every per-caller limit, its
// sessions, its streams in a session and its dial rate, is refused clearly
// (429 at the upgrade; the stream credit; REFUSED_STREAM naming the rate),
// each refusal counted, while another caller (token B) echoes as usual.
func TestLimitsPerCaller(t *testing.T) {
	hold := make(chan struct{})
	holding := tcpServer(t, func(c net.Conn) { <-hold })
	echo := echoServer(t)
	const tokA, tokB = "token-of-caller-a", "token-of-caller-b"
	srv, err := NewServer(ServerConfig{
		Allow:  []string{holding, echo},
		Auth:   auth.New([]string{tokA, tokB}, nil),
		Logger: testLogger(t),
		Limits: ops.Limits{SessionsPerCaller: 2, StreamsPerSession: 3, DialsPerSecond: 0.001, DialBurst: 3, BufferPerCaller: 8 << 20},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	u := wsURL(t, hs.URL)
	dial := func(tok string) (*mux.Session, error) {
		return (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer " + tok}}}).Dial(context.Background(), u)
	}
	var sessions []*mux.Session
	defer func() {
		close(hold)
		for _, s := range sessions {
			s.Close()
		}
		hs.Close()
		srv.Metrics().Sessions.Drain(context.Background())
		srv.Wait()
	}()

	// Sessions: two, then 429.
	for range 2 {
		s, err := dial(tokA)
		if err != nil {
			t.Fatal(err)
		}
		sessions = append(sessions, s)
	}
	_, err = dial(tokA)
	var he *mux.HandshakeError
	if !errors.As(err, &he) || he.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(he.Body), "--max-sessions-per-caller") {
		t.Fatalf("A's third session: %v, want 429 naming --max-sessions-per-caller", err)
	}

	// Streams: three on A's first session fill its credit and its dial
	// burst; the fourth dial (on A's second session) is over the rate.
	a := sessions[0]
	for range 3 {
		if _, err := a.Open(context.Background(), http.Header{TargetHeader: {holding}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := a.NumStreams(); n != 3 {
		t.Fatalf("A's session holds %d streams, want 3", n)
	}
	// A fourth waits for a slot (the server granted three): it is still
	// waiting when its own deadline ends it.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err = a.Open(ctx, http.Header{TargetHeader: {holding}})
	cancel()
	var ne net.Error
	if !errors.Is(err, context.DeadlineExceeded) && !(errors.As(err, &ne) && ne.Timeout()) {
		t.Fatalf("A's fourth stream: %v, want it waiting for stream credit", err)
	}
	_, err = sessions[1].Open(context.Background(), http.Header{TargetHeader: {holding}})
	var se *mux.StreamError
	if !errors.As(err, &se) || se.Code != frame.RefusedStream || !strings.Contains(se.Reason, "--max-dials-per-second") {
		t.Fatalf("A's dial over the rate: %v, want REFUSED_STREAM naming --max-dials-per-second", err)
	}

	// B is unaffected: its own session, dials and a full echo.
	b, err := dial(tokB)
	if err != nil {
		t.Fatalf("B's session: %v", err)
	}
	sessions = append(sessions, b)
	for range 3 {
		st, err := b.Open(context.Background(), http.Header{TargetHeader: {echo}})
		if err != nil {
			t.Fatalf("B's stream: %v", err)
		}
		data := randBytes(256 << 10)
		go func() { st.Write(data); st.CloseWrite() }()
		got, err := io.ReadAll(st)
		if err != nil || string(got) != string(data) {
			t.Fatalf("B's echo: %d of %d bytes, %v", len(got), len(data), err)
		}
	}

	m := srv.Metrics()
	body := scrape(t, m)
	for _, want := range []string{
		`wsmux_limit_refusals_total{limit="sessions_per_caller"} 1`,
		`wsmux_limit_refusals_total{limit="dials_per_second"} 1`,
		`wsmux_limit_refusals_total{limit="streams_per_session"} 1`,
		`wsmux_tunnel_refused_total{reason="rate_limited"} 1`,
		`wsmux_limit{limit="buffer_bytes_per_caller"} 8.388608e+06`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func scrape(t *testing.T, m *ops.Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	return rec.Body.String()
}
