package gateway

import (
	"context"
	"encoding/pem"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// Connections that drop between the 101 and the client's SETTINGS: the
// gateway must not keep their sessions for --resume-timeout (resumption
// is in effect only once both SETTINGS set RESUME), so they do not hold
// the caller's session slots, the upstream exec, goroutines or memory.

// droppingGateway is a gateway with resumption on (the default 30 s) and
// lim in front of a stand-in cluster, and the number of its requests
// being served: a streaming request is served until its session ended and
// its upstream connection and session slot were given back.
type droppingGateway struct {
	g        *Gateway
	srv      *httptest.Server
	inFlight testnet.Gauge
}

func startDroppingGateway(t *testing.T, cluster *rest.Config, lim ops.Limits) *droppingGateway {
	t.Helper()
	g, err := New(Config{
		Auth:          auth.New([]string{callerToken}, nil),
		Cluster:       cluster,
		Limits:        lim,
		Logger:        slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, &slog.HandlerOptions{Level: slog.LevelError})),
		ResumeTimeout: 30 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	d := &droppingGateway{g: g}
	h := g.Handler()
	d.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d.inFlight.Add(1)
		defer d.inFlight.Add(-1)
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		d.srv.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		g.Metrics().Sessions.Drain(ctx)
	})
	return d
}

// execURL is a wsmux exec of cat through d.
func (d *droppingGateway) execURL() string {
	return "ws" + strings.TrimPrefix(d.srv.URL, "http") +
		"/api/v1/namespaces/default/pods/web-0/exec?command=cat&container=app&stdin=true&stdout=true&stderr=true"
}

// execHeader is what a wsmux exec client sends with its upgrade.
func execHeader() http.Header {
	return http.Header{"Authorization": {"Bearer " + callerToken}, "X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}
}

// dropper drops connections to d's wsmux exec after the 101.
func (d *droppingGateway) dropper(t testing.TB) *testnet.Dropper {
	return testnet.NewDropper(t, d.execURL(), execHeader(), mux.HeaderResumeToken)
}

// released waits, at most within, until every request d serves has ended
// (its session ended, its slot given back) and u holds no connection.
func (d *droppingGateway) released(u *heldUpstream, within time.Duration) bool {
	deadline := time.Now().Add(within)
	return d.inFlight.WaitZero(within) && u.open.WaitZero(time.Until(deadline))
}

// TestDroppedBeforeSettingsNotLockedOut: a caller allowed two sessions
// (--max-sessions-per-caller 2) whose connection breaks between the 101
// and its SETTINGS six times in a row, each kind of break in turn, gets a
// 101 every time, and then holds two sessions at once; only a third is
// refused (429). Each broken session ended at once, giving back its
// upstream connection and its session slot, instead of being suspended
// for --resume-timeout (30 s) and refusing the caller from the third
// attempt on.
func TestDroppedBeforeSettingsNotLockedOut(t *testing.T) {
	u := startHeldUpstream(t)
	d := startDroppingGateway(t, u.restConfig(), ops.Limits{SessionsPerCaller: 2})
	dr := d.dropper(t)
	for i := range 6 {
		k := testnet.DropKind(i % int(testnet.DropKinds))
		if err := dr.Drop(k); err != nil {
			t.Fatalf("attempt %d (%v): %v", i+1, k, err)
		}
		if !d.released(u, 5*time.Second) {
			t.Fatalf("attempt %d (%v): 5 s after the connection broke, its session still holds the caller's slot (%d sessions) and its upstream connection (%d open)",
				i+1, k, d.g.Metrics().Sessions.Len(), u.open.Len())
		}
	}
	dial := func() (*mux.Session, error) {
		dl := mux.Dialer{Header: execHeader()}
		return dl.Dial(context.Background(), d.execURL())
	}
	for i := range 2 {
		s, err := dial()
		if err != nil {
			t.Fatalf("session %d of the caller's 2 after its broken connections: %v", i+1, err)
		}
		defer s.Close()
	}
	var he *mux.HandshakeError
	if _, err := dial(); !errors.As(err, &he) || he.StatusCode != http.StatusTooManyRequests || !strings.Contains(string(he.Body), "--max-sessions-per-caller") {
		t.Fatalf("a third session: %v, want 429 naming --max-sessions-per-caller", err)
	}
	expectMetrics(t, d.g, `wsmux_limit_refusals_total{limit="sessions_per_caller"} 1`, `wsmux_sessions_suspended 0`,
		`wsmux_suspensions_total{event="suspended"} 0`)
}

// heldUpstream is an upstream for TestBurstOfDropsBackToBaseline: it
// answers each exec's SPDY upgrade and holds the connection, without a
// goroutine of its own beyond the connection's, until the gateway closes
// it. The stand-in cluster would not do here: its exec handler (the
// kubelet's code) waits for its streams for 30 s whatever happens to the
// connection, in this process, which would hide the gateway's own
// figures. With this one, an upstream connection the gateway kept open
// shows in the goroutines and the heap; open counts them.
type heldUpstream struct {
	srv  *httptest.Server
	open testnet.Gauge
}

func startHeldUpstream(t *testing.T) *heldUpstream {
	u := &heldUpstream{}
	u.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := k8shttpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
			return
		}
		u.open.Add(1) // before the 101: a gateway that has it finds it counted
		defer u.open.Add(-1)
		c := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(k8shttpstream.Stream, <-chan struct{}) error { return nil })
		if c == nil {
			return
		}
		<-c.CloseChan()
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *heldUpstream) restConfig() *rest.Config {
	return &rest.Config{Host: u.srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.srv.Certificate().Raw})}}
}

// TestBurstOfDropsBackToBaseline: 2,000 connect-and-drop cycles (fewer
// under the race detector), four at a time, from one caller against a
// gateway with resumption on (30 s) and no per-caller session limit (the
// limit's part is TestDroppedBeforeSettingsNotLockedOut): each upgrades a
// wsmux exec (the gateway dials the upstream exec), gets its 101 and
// resume token, and drops before its SETTINGS set RESUME. Within a few
// seconds the gateway's sessions, upstream connections, goroutines and
// heap are back at their baseline.
func TestBurstOfDropsBackToBaseline(t *testing.T) {
	u := startHeldUpstream(t)
	d := startDroppingGateway(t, u.restConfig(), ops.Limits{})
	dr := d.dropper(t)
	const workers = 4
	// The warm-up: the pools, the upstream transport's and the servers'
	// goroutines a first burst starts are in the baseline.
	if err := dr.Burst(40, workers); err != nil {
		t.Fatal(err)
	}
	if !d.released(u, 10*time.Second) {
		t.Fatalf("after the warm-up: %d requests in flight, %d upstream connections", d.inFlight.Len(), u.open.Len())
	}
	baseline := leakcheck.IgnoreCurrent()
	baseHeap := heapInuse()

	start := time.Now()
	if err := dr.Burst(burstCycles, workers); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	peakRequests, peakUpstreams := d.inFlight.Len(), u.open.Len()
	if !d.released(u, 5*time.Second) {
		t.Fatalf("5 s after the burst: %d sessions, %d requests in flight, %d upstream connections",
			d.g.Metrics().Sessions.Len(), d.inFlight.Len(), u.open.Len())
	}
	settledIn := time.Since(start) - took
	leakcheck.VerifyNone(t, append(testnet.IgnoredGoroutines(), baseline)...)
	heap := heapInuse()
	t.Logf("%d connect-and-drop cycles in %v, %d requests in flight and %d upstream connections right after; %v later none, heap in use %.1f MiB (baseline %.1f MiB)",
		burstCycles, took.Round(time.Millisecond), peakRequests, peakUpstreams, settledIn.Round(time.Millisecond),
		float64(heap)/(1<<20), float64(baseHeap)/(1<<20))
	if heap > baseHeap+baseHeap/4+(1<<20) {
		t.Errorf("heap in use %d bytes after the burst, baseline %d", heap, baseHeap)
	}
	if n := d.g.Metrics().Sessions.Len(); n != 0 {
		t.Errorf("%d sessions left with no request in flight", n)
	}
	expectMetrics(t, d.g, `wsmux_sessions_suspended 0`, `wsmux_suspensions_total{event="suspended"} 0`)
}

// heapInuse is the heap in use after two collections.
func heapInuse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}
