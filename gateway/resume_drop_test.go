package gateway

import (
	"bytes"
	"context"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"k8s.io/client-go/rest"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/internal/wshandshake"
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
	inFlight atomic.Int64
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

// dropKind is how a connect-and-drop cycle ends its connection after the
// 101, before its SETTINGS could make resumption take effect.
type dropKind int

const (
	dropAfter101      dropKind = iota // close at once (FIN)
	resetAfter101                     // close with a TCP reset
	dropInSettings                    // half of a SETTINGS frame, then close
	dropAfterSettings                 // a SETTINGS without RESUME, then close
	dropKinds
)

func (k dropKind) String() string {
	return [...]string{"dropped after the 101", "reset after the 101", "dropped inside its SETTINGS",
		"dropped after SETTINGS without RESUME"}[k]
}

// settingsMessage is a client's SETTINGS as one masked WebSocket message.
func settingsMessage(t testing.TB, resume bool) []byte {
	t.Helper()
	var set frame.Settings
	if resume {
		if err := set.Set(frame.SettingFeatures, frame.FeatureResume); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if err := ws.WriteFrame(&b, ws.MaskFrame(ws.NewBinaryFrame(frame.AppendSettings(nil, &set)))); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// connectAndDrop upgrades to url, checks the 101 carries a resume token
// and drops the connection as k says. A refusal is a *mux.HandshakeError.
func connectAndDrop(url string, k dropKind, settings, plain []byte) error {
	conn, _, hdr, err := wshandshake.Dial(context.Background(), url, wshandshake.DialOptions{Header: execHeader()})
	if err != nil {
		return err
	}
	defer conn.Close()
	if hdr.Get(mux.HeaderResumeToken) == "" {
		return errors.New("no resume token in the 101")
	}
	switch k {
	case resetAfter101:
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
	case dropInSettings:
		_, err = conn.Write(settings[:len(settings)/2])
	case dropAfterSettings:
		_, err = conn.Write(plain)
	}
	return err
}

// until polls cond until it holds or within passed, and reports whether it
// held. Polling is the point here: what is observed is that nothing is
// left.
func until(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
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
	settings, plain := settingsMessage(t, true), settingsMessage(t, false)
	for i := range 6 {
		k := dropKind(i % int(dropKinds))
		if err := connectAndDrop(d.execURL(), k, settings, plain); err != nil {
			t.Fatalf("attempt %d (%v): %v", i+1, k, err)
		}
		if !until(5*time.Second, func() bool { return d.inFlight.Load() == 0 && u.open.Load() == 0 }) {
			t.Fatalf("attempt %d (%v): 5 s after the connection broke, its session still holds the caller's slot (%d sessions) and its upstream connection (%d open)",
				i+1, k, d.g.Metrics().Sessions.Len(), u.open.Load())
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
	open atomic.Int64
}

func startHeldUpstream(t *testing.T) *heldUpstream {
	u := &heldUpstream{}
	u.srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := k8shttpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
			return
		}
		c := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(k8shttpstream.Stream, <-chan struct{}) error { return nil })
		if c == nil {
			return
		}
		u.open.Add(1)
		defer u.open.Add(-1)
		<-c.CloseChan()
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *heldUpstream) restConfig() *rest.Config {
	return &rest.Config{Host: u.srv.URL, TLSClientConfig: rest.TLSClientConfig{
		CAData: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: u.srv.Certificate().Raw})}}
}

// footprint is what the gateway process holds: sessions, goroutines, heap
// in use after a collection.
type footprint struct {
	sessions, inFlight, upstreams int
	goroutines                    int
	heap                          uint64
}

func (f footprint) String() string {
	return fmt.Sprintf("%d sessions (%d requests in flight, %d upstream connections), %d goroutines, heap in use %.1f MiB",
		f.sessions, f.inFlight, f.upstreams, f.goroutines, float64(f.heap)/(1<<20))
}

func (d *droppingGateway) measure(u *heldUpstream) footprint {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return footprint{sessions: d.g.Metrics().Sessions.Len(), inFlight: int(d.inFlight.Load()), upstreams: int(u.open.Load()),
		goroutines: runtime.NumGoroutine(), heap: m.HeapInuse}
}

// burst runs n connect-and-drop cycles, workers at a time, the kinds of
// drop in turn; it reports the first error.
func (d *droppingGateway) burst(t testing.TB, n, workers int) error {
	settings, plain := settingsMessage(t, true), settingsMessage(t, false)
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				k := dropKind(i % int(dropKinds))
				if err := connectAndDrop(d.execURL(), k, settings, plain); err != nil {
					once.Do(func() { first = fmt.Errorf("cycle %d (%v): %w", i, k, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
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
	const workers = 4
	idle := func(f footprint) bool { return f.sessions == 0 && f.inFlight == 0 && f.upstreams == 0 }
	// The warm-up: the pools, the upstream transport's and the servers'
	// goroutines a first burst starts are in the baseline.
	if err := d.burst(t, 40, workers); err != nil {
		t.Fatal(err)
	}
	var base footprint
	if !until(10*time.Second, func() bool { base = d.measure(u); return idle(base) }) {
		t.Fatalf("after the warm-up: %v", base)
	}
	t.Logf("baseline: %v", base)
	start := time.Now()
	if err := d.burst(t, burstCycles, workers); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	peak := d.measure(u)
	const within = 5 * time.Second
	var after footprint
	start = time.Now()
	ok := until(within, func() bool {
		after = d.measure(u)
		return idle(after) && after.goroutines <= base.goroutines+4 && after.heap <= base.heap+base.heap/4+(1<<20)
	})
	t.Logf("%d connect-and-drop cycles in %v; right after: %v", burstCycles, took.Round(time.Millisecond), peak)
	t.Logf("%v later: %v", time.Since(start).Round(time.Millisecond), after)
	if !ok {
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Fatalf("not back at the baseline %v after %v: %v; goroutines:\n%s", base, within, after, b.String())
	}
	expectMetrics(t, d.g, `wsmux_sessions_suspended 0`, `wsmux_suspensions_total{event="suspended"} 0`)
}
