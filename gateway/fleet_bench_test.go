package gateway

import (
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/clustertest"
	"github.com/wsmux/wsmux/gateway/kubeclient"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/sharedstate"
	"github.com/wsmux/wsmux/internal/testnet"
)

// timedStore adds up the time of the calls an upgrade makes to the store
// before its 101 (the session and dial counts, the resume token).
type timedStore struct {
	sharedstate.Store
	mu  sync.Mutex
	sum time.Duration
}

func (s *timedStore) add(start time.Time) { s.mu.Lock(); s.sum += time.Since(start); s.mu.Unlock() }

func (s *timedStore) take() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.sum
	s.sum = 0
	return d
}

func (s *timedStore) AcquireSession(ctx context.Context, caller, replica, session string, limit int) error {
	defer s.add(time.Now())
	return s.Store.AcquireSession(ctx, caller, replica, session, limit)
}

func (s *timedStore) TakeDial(ctx context.Context, caller string, rate float64, burst int) (time.Duration, error) {
	defer s.add(time.Now())
	return s.Store.TakeDial(ctx, caller, rate, burst)
}

func (s *timedStore) PutResumeOwner(ctx context.Context, key [32]byte, replica string, ttl time.Duration) error {
	defer s.add(time.Now())
	return s.Store.PutResumeOwner(ctx, key, replica, ttl)
}

// BenchmarkUpgradeLatency measures what the fleet's shared state adds to
// an upgrade: one exec at a time (`err x`, which writes x to stderr, through the gateway to the
// stand-in cluster, wsmux downstream, SPDY upstream) with resumption and a
// session limit on, without a fleet ("local") and with a real Redis on
// loopback ("redis"). It reports the median and 99th percentile of the
// whole exec (exec-p50-µs, exec-p99-µs) and, with Redis, of the time the
// calls to the store took before the 101 (store-p50-µs, store-p99-µs: the
// caller's session and dial counted by two scripts, the resume token's
// owner SET). docs/gateway.md has the figures of
//
//	go test -run '^$' -bench UpgradeLatency -benchtime 1000x ./gateway/
func BenchmarkUpgradeLatency(b *testing.B) {
	for _, mode := range []string{"local", "redis"} {
		b.Run(mode, func(b *testing.B) {
			cl := clustertest.Start(b)
			cfg := Config{
				Auth: auth.New([]string{callerToken}, nil), Cluster: cl.RestConfig(),
				Logger:        slog.New(slog.NewTextHandler(io.Discard, nil)),
				ResumeTimeout: 30 * time.Second,
				Limits:        ops.Limits{SessionsPerCaller: 64, DialsPerSecond: 1e6},
			}
			var ts *timedStore
			if mode == "redis" {
				rs := testnet.StartRedis(b)
				st, err := sharedstate.NewRedis(sharedstate.RedisConfig{URL: rs.URL()})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				ts = &timedStore{Store: st}
				cfg.Fleet = &FleetConfig{Store: ts, Replica: "bench", Advertise: "127.0.0.1:1", Secret: []byte(strings.Repeat("s", MinFleetSecret))}
			}
			g, err := New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer g.Close()
			srv := serveGateway(b, g)
			o := kubeclient.Options{Server: srv.URL, Token: callerToken}
			var exec, store []time.Duration
			for b.Loop() {
				start := time.Now()
				err := kubeclient.Exec(context.Background(), o, kubeclient.ExecOptions{
					Namespace: "default", Pod: "web-0", Command: []string{"err", "x"}, Stdout: io.Discard, Stderr: io.Discard,
				})
				if err != nil {
					b.Fatal(err)
				}
				exec = append(exec, time.Since(start))
				if ts != nil {
					store = append(store, ts.take())
				}
			}
			report := func(name string, v []time.Duration) {
				slices.Sort(v)
				for _, p := range []struct {
					q    float64
					unit string
				}{{0.5, "-p50-µs"}, {0.99, "-p99-µs"}} {
					b.ReportMetric(float64(v[int(p.q*float64(len(v)-1))].Microseconds()), name+p.unit)
				}
			}
			report("exec", exec)
			if ts != nil {
				report("store", store)
			}
		})
	}
}
