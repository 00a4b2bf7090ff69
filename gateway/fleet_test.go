package gateway

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/sharedstate"
	"github.com/wsmux/wsmux/internal/testnet"
	"github.com/wsmux/wsmux/mux"
)

// flakyStore is a Memory store that can be taken down: every call fails
// while down is set.
type flakyStore struct {
	*sharedstate.Memory
	down atomic.Bool
}

var errStoreDown = errors.New("store down (test)")

func (s *flakyStore) err() error {
	if s.down.Load() {
		return errStoreDown
	}
	return nil
}

func (s *flakyStore) AcquireSession(ctx context.Context, caller, replica, session string, limit int) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Memory.AcquireSession(ctx, caller, replica, session, limit)
}

func (s *flakyStore) TakeDial(ctx context.Context, caller string, rate float64, burst int) (time.Duration, error) {
	if err := s.err(); err != nil {
		return 0, err
	}
	return s.Memory.TakeDial(ctx, caller, rate, burst)
}

func (s *flakyStore) PutResumeOwner(ctx context.Context, key [32]byte, replica string, ttl time.Duration) error {
	if err := s.err(); err != nil {
		return err
	}
	return s.Memory.PutResumeOwner(ctx, key, replica, ttl)
}

const fleetSecret = "a fleet secret of at least 32 bytes!"

// startReplica runs a gateway that is replica name of the fleet sharing
// store, in front of cl.
func startReplica(t *testing.T, cl *clustertest.Cluster, store sharedstate.Store, name string, lim ops.Limits) (*Gateway, *httptest.Server) {
	t.Helper()
	fleetSrv := httptest.NewUnstartedServer(nil)
	g, err := New(Config{
		Auth: auth.New([]string{tokA, tokB}, nil), Cluster: cl.RestConfig(), Limits: lim, ResumeTimeout: 30 * time.Second,
		Logger: slog.New(slog.NewTextHandler(testnet.LogWriter{T: t}, nil)).With("replica", name),
		Fleet:  &FleetConfig{Store: store, Replica: name, Advertise: fleetSrv.Listener.Addr().String(), Secret: []byte(fleetSecret)},
	})
	if err != nil {
		t.Fatal(err)
	}
	fleetSrv.Config.Handler = g.FleetHandler()
	fleetSrv.Start()
	t.Cleanup(func() { fleetSrv.Close(); _ = g.Close() })
	return g, serveGateway(t, g)
}

// TestFleetSessionLimitInProcess: two replicas sharing a Memory store:
// caller A's one session (a held port-forward) on replica 1 makes replica
// 2 refuse its next with 429 "across the gateway's replicas", counted in
// wsmux_limit_refusals_total; caller B is served by replica 2.
func TestFleetSessionLimitInProcess(t *testing.T) {
	cl := clustertest.Start(t)
	store := sharedstate.NewMemory()
	lim := ops.Limits{SessionsPerCaller: 1}
	_, srv1 := startReplica(t, cl, store, "r1", lim)
	g2, srv2 := startReplica(t, cl, store, "r2", lim)
	stop := holdPortForward(t, kubeclient.Options{Server: srv1.URL, Token: tokA})
	defer stop()
	_, err := execCat(t, kubeclient.Options{Server: srv2.URL, Token: tokA}, []byte("a"))
	if !isStatus(err, http.StatusTooManyRequests, "across the gateway's replicas") {
		t.Fatalf("A's second session on the other replica: %v, want 429 across the replicas", err)
	}
	if got, err := execCat(t, kubeclient.Options{Server: srv2.URL, Token: tokB}, []byte("b")); err != nil || string(got) != "b" {
		t.Fatalf("B on replica 2: %q, %v", got, err)
	}
	expectMetrics(t, g2, `wsmux_limit_refusals_total{limit="sessions_per_caller"} 1`)
}

// holdPortForward holds a port-forward session until stop.
func holdPortForward(t *testing.T, o kubeclient.Options) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- kubeclient.PortForward(ctx, o, kubeclient.PortForwardOptions{
			Namespace: "default", Pod: "web-0", Ports: []string{"0:8080"}, Out: discard{}, Err: discard{},
		}, func(*kubeclient.PortForwarder) { close(started) })
	}()
	select {
	case <-started:
	case err := <-done:
		cancel()
		t.Fatal(err)
	}
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestFleetStoreDownLimitsPerReplica: with the store down, limits count
// on each replica alone (the documented fail-open choice): caller A's
// session on replica 1 does not stop one on replica 2, a second on
// replica 1 is refused by replica 1's own count, every call to the store
// failed is counted, and wsmux_shared_state_up is 0.
func TestFleetStoreDownLimitsPerReplica(t *testing.T) {
	cl := clustertest.Start(t)
	store := &flakyStore{Memory: sharedstate.NewMemory()}
	lim := ops.Limits{SessionsPerCaller: 1, DialsPerSecond: 100}
	_, srv1 := startReplica(t, cl, store, "r1", lim)
	g2, srv2 := startReplica(t, cl, store, "r2", lim)
	store.down.Store(true)
	stop := holdPortForward(t, kubeclient.Options{Server: srv1.URL, Token: tokA})
	defer stop()
	if got, err := execCat(t, kubeclient.Options{Server: srv2.URL, Token: tokA}, []byte("a")); err != nil || string(got) != "a" {
		t.Fatalf("A on replica 2 with the store down: %q, %v; want served (per-replica limits)", got, err)
	}
	if _, err := execCat(t, kubeclient.Options{Server: srv1.URL, Token: tokA}, []byte("a")); !isStatus(err, http.StatusTooManyRequests, "--max-sessions-per-caller") {
		t.Fatalf("A's second session on replica 1: %v, want 429 by the replica's own count", err)
	}
	expectMetrics(t, g2, "wsmux_shared_state_up 0", `wsmux_shared_state_requests_total{op="session_acquire",result="error"} 1`,
		`wsmux_shared_state_requests_total{op="dial",result="error"} 1`)
}

// TestFleetHandlerRefusesUnsigned: the fleet listener serves only resumes
// signed with the fleet's secret, recent, for the path and token signed:
// anything else is 401 and counted as wsmux_auth_failures_total{reason="fleet_forward"}.
func TestFleetHandlerRefusesUnsigned(t *testing.T) {
	cl := clustertest.Start(t)
	g, _ := startReplica(t, cl, sharedstate.NewMemory(), "r1", ops.Limits{})
	h := g.FleetHandler()
	const path = "/api/v1/namespaces/default/pods/web-0/exec?command=cat"
	good := func(secret string, at time.Time, mutate func(h http.Header)) *http.Request {
		r := httptest.NewRequest(http.MethodGet, path, nil)
		r.Header.Set(mux.HeaderResumeToken, "tok")
		b, _ := json.Marshal(fleetCaller{ID: "token#1", Name: "alice"})
		caller := base64.RawURLEncoding.EncodeToString(b)
		ts := strconv.FormatInt(at.Unix(), 10)
		f := &fleet{cfg: FleetConfig{Secret: []byte(secret)}}
		r.Header.Set(headerFleetCaller, caller)
		r.Header.Set(headerFleetClient, "10.0.0.1:1234")
		r.Header.Set(headerFleetTime, ts)
		r.Header.Set(headerFleetSignature, f.sign(ts, http.MethodGet, path, "tok", caller, "10.0.0.1:1234"))
		if mutate != nil {
			mutate(r.Header)
		}
		return r
	}
	other, _ := json.Marshal(fleetCaller{ID: "token#2", Name: "mallory"})
	for _, tc := range []struct {
		name string
		r    *http.Request
		want string
	}{
		{"no signature", good(fleetSecret, time.Now(), func(h http.Header) { h.Del(headerFleetSignature) }), "bad " + headerFleetSignature},
		{"another secret", good(strings.Repeat("x", 32), time.Now(), nil), "bad " + headerFleetSignature},
		{"stale", good(fleetSecret, time.Now().Add(-time.Minute), nil), "stale"},
		{"from the future", good(fleetSecret, time.Now().Add(time.Minute), nil), "stale"},
		{"another caller", good(fleetSecret, time.Now(), func(h http.Header) {
			h.Set(headerFleetCaller, base64.RawURLEncoding.EncodeToString(other))
		}), "bad " + headerFleetSignature},
		{"another token", good(fleetSecret, time.Now(), func(h http.Header) { h.Set(mux.HeaderResumeToken, "tok2") }), "bad " + headerFleetSignature},
		{"not a resume", good(fleetSecret, time.Now(), func(h http.Header) { h.Del(mux.HeaderResumeToken) }), "not a resume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, tc.r)
			if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), tc.want) {
				t.Fatalf("%d %q, want 401 saying %q", w.Code, w.Body.String(), tc.want)
			}
		})
	}
	expectMetrics(t, g, `wsmux_auth_failures_total{reason="fleet_forward"} 7`)
	// A signed resume of a session nobody holds: the documented unknown.
	w := httptest.NewRecorder()
	h.ServeHTTP(w, good(fleetSecret, time.Now(), nil))
	if w.Code == http.StatusUnauthorized {
		t.Fatalf("a signed resume refused: %d %q", w.Code, w.Body.String())
	}
}

// TestFleetResumeOwnerGone: a resume whose session's owner left the
// directory is answered 404 "Wsmux-Resume: unknown" at once by the
// replica it reached, and counted as owner_gone.
func TestFleetResumeOwnerGone(t *testing.T) {
	cl := clustertest.Start(t)
	store := sharedstate.NewMemory()
	g, srv := startReplica(t, cl, store, "r1", ops.Limits{})
	key := sha256.Sum256([]byte("tok-of-a-dead-replica"))
	if err := store.PutResumeOwner(context.Background(), key, "r0", time.Minute); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/api/v1/namespaces/default/pods/web-0/exec?command=cat", nil)
	req.Header.Set("Authorization", "Bearer "+tokA)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "websocket")
	req.Header.Set("Sec-WebSocket-Version", "13")
	req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
	req.Header.Set("Sec-WebSocket-Protocol", mux.Subprotocol)
	req.Header.Set(mux.HeaderResumeToken, "tok-of-a-dead-replica")
	req.Header.Set(mux.HeaderResumeReceived, "0")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound || resp.Header.Get("Wsmux-Resume") != "unknown" || time.Since(start) > time.Second {
		t.Fatalf("%s, Wsmux-Resume %q after %v; want 404 unknown at once", resp.Status, resp.Header.Get("Wsmux-Resume"), time.Since(start))
	}
	expectMetrics(t, g, `wsmux_resume_forwards_total{outcome="owner_gone"} 1`)
}
