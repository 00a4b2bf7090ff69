package gateway

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httputil"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/sharedstate"
)

// FleetConfig makes a Gateway one replica of a fleet that shares its
// state in a sharedstate.Store (docs/load-balancers.md): used tickets (the
// ticket.Verifier's Shared), each caller's sessions and dials counted
// across the fleet, and a directory of the replicas and of which one
// holds each resumable session, so that a resume reaching any replica is
// forwarded to the one that holds it.
type FleetConfig struct {
	// Store is the shared state (required).
	Store sharedstate.Store
	// Replica names this replica, unique in the fleet (default: the host
	// name and the process id).
	Replica string
	// Advertise is the host:port at which the other replicas reach this
	// one's FleetHandler (required with ResumeTimeout).
	Advertise string
	// Secret authenticates forwarded resumes between replicas
	// (HMAC-SHA256): the same on every replica, at least 32 bytes.
	Secret []byte
	// Heartbeat is how often the replica announces itself (default 1 s);
	// three missed and the others count it dead: its sessions no longer
	// count against their callers' limits.
	Heartbeat time.Duration
	// ForwardTimeout bounds the connection to the replica a resume is
	// forwarded to (default 1 s): past it that replica is taken for dead
	// and the client gets "unknown session".
	ForwardTimeout time.Duration
}

const (
	defaultHeartbeat      = time.Second
	defaultForwardTimeout = time.Second
	// ownerTTL is how long a resume owner record lives unless refreshed
	// (every ownerTTL/3 while the session lives): records of a replica
	// that died go within it.
	ownerTTL = 10 * time.Minute
	// MinFleetSecret is the shortest FleetConfig.Secret.
	MinFleetSecret = 32
)

// fleet is a Gateway's part of the fleet.
type fleet struct {
	cfg   FleetConfig
	g     *Gateway
	log   *slog.Logger
	store sharedstate.Store
	seq   atomic.Uint64
	up    atomic.Bool
	upMu  sync.Mutex // orders the transitions of up, its gauge and log lines
	proxy *httputil.ReverseProxy

	mu       sync.Mutex
	owned    map[[32]byte]struct{} // resume tokens of sessions held here
	releases []pendingRelease      // session releases the store missed
	drops    chan [32]byte

	stop chan struct{}
	done chan struct{}

	calls    *prometheus.CounterVec
	latency  *prometheus.HistogramVec
	upGauge  prometheus.Gauge
	forwards *prometheus.CounterVec
}

// pendingRelease is a session release the store missed, retried by the
// heartbeat.
type pendingRelease struct{ caller, session string }

// Store operations, the label of wsmux_shared_state_*.
var storeOps = []string{"ticket", "session_acquire", "session_release", "dial", "heartbeat", "resume_put",
	"resume_refresh", "resume_lookup", "resume_drop", "replica_lookup"}

// Outcomes of a resume that reached a replica not holding its session.
var forwardOutcomes = []string{"forwarded", "owner_gone", "owner_unreachable", "store_unavailable"}

func newFleet(g *Gateway, cfg FleetConfig) (*fleet, error) {
	if cfg.Store == nil {
		return nil, errors.New("gateway: fleet: no shared state store")
	}
	if cfg.Replica == "" {
		h, _ := os.Hostname()
		cfg.Replica = fmt.Sprintf("%s-%d", h, os.Getpid())
	}
	if g.cfg.ResumeTimeout > 0 {
		if cfg.Advertise == "" {
			return nil, errors.New("gateway: fleet: resumption needs the address the other replicas forward resumes to (--advertise-address)")
		}
		if len(cfg.Secret) < MinFleetSecret {
			return nil, fmt.Errorf("gateway: fleet: a secret of %d bytes authenticates forwarded resumes: want at least %d, the same on every replica (head -c 32 /dev/urandom | base64)", len(cfg.Secret), MinFleetSecret)
		}
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = defaultHeartbeat
	}
	if cfg.ForwardTimeout <= 0 {
		cfg.ForwardTimeout = defaultForwardTimeout
	}
	f := &fleet{cfg: cfg, g: g, log: g.log.With("replica", cfg.Replica), store: cfg.Store,
		owned: map[[32]byte]struct{}{}, drops: make(chan [32]byte, 4096),
		stop: make(chan struct{}), done: make(chan struct{}),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_shared_state_requests_total", Help: "Calls to the fleet's shared state, by operation and result (ok, error).",
		}, []string{"op", "result"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "wsmux_shared_state_seconds", Help: "Time of the calls to the fleet's shared state, by operation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		upGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "wsmux_shared_state_up", Help: "1 while the fleet's shared state answers, 0 since a call to it failed.",
		}),
		forwards: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "wsmux_resume_forwards_total", Help: "Resumes of a session another replica holds: forwarded to it, or answered unknown (owner_gone, owner_unreachable), or served here because the shared state did not answer (store_unavailable).",
		}, []string{"outcome"}),
	}
	for _, op := range storeOps {
		f.calls.WithLabelValues(op, "ok")
		f.calls.WithLabelValues(op, "error")
	}
	for _, o := range forwardOutcomes {
		f.forwards.WithLabelValues(o)
	}
	if err := g.m.Registry.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "wsmux_fleet_resumable_sessions", Help: "Resume tokens this replica holds and keeps in the fleet's directory.",
	}, func() float64 { f.mu.Lock(); defer f.mu.Unlock(); return float64(len(f.owned)) })); err != nil {
		return nil, err
	}
	for _, c := range []prometheus.Collector{f.calls, f.latency, f.upGauge, f.forwards} {
		if err := g.m.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	f.up.Store(true)
	f.upGauge.Set(1)
	f.proxy = f.newForwarder()
	return f, nil
}

// start announces the replica and runs its heartbeat until close.
func (f *fleet) start() {
	_ = f.call(context.Background(), "heartbeat", func(ctx context.Context) error {
		return f.store.Heartbeat(ctx, f.cfg.Replica, f.cfg.Advertise, 3*f.cfg.Heartbeat)
	})
	go f.loop()
}

// close stops the heartbeat and leaves the directory.
func (f *fleet) close() {
	close(f.stop)
	<-f.done
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.ForwardTimeout)
	defer cancel()
	_ = f.store.Leave(ctx, f.cfg.Replica)
}

func (f *fleet) loop() {
	defer close(f.done)
	t := time.NewTicker(f.cfg.Heartbeat)
	defer t.Stop()
	lastRefresh := time.Now()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		ctx := context.Background()
		_ = f.call(ctx, "heartbeat", func(ctx context.Context) error {
			return f.store.Heartbeat(ctx, f.cfg.Replica, f.cfg.Advertise, 3*f.cfg.Heartbeat)
		})
		f.flushDrops(ctx)
		f.mu.Lock()
		pending := f.releases
		f.releases = nil
		f.mu.Unlock()
		for _, r := range pending {
			f.releaseSession(ctx, r)
		}
		if time.Since(lastRefresh) >= ownerTTL/3 {
			lastRefresh = time.Now()
			f.mu.Lock()
			keys := make([][32]byte, 0, len(f.owned))
			for k := range f.owned {
				keys = append(keys, k)
			}
			f.mu.Unlock()
			for len(keys) > 0 { // in pipelines of 1,000, each within the store's timeout
				n := min(len(keys), 1000)
				batch := keys[:n]
				keys = keys[n:]
				_ = f.call(ctx, "resume_refresh", func(ctx context.Context) error { return f.store.RefreshResumeOwners(ctx, batch, ownerTTL) })
			}
		}
	}
}

// call runs one store operation, counts and times it, and logs the
// store's going down and coming back (once each, not per call).
func (f *fleet) call(ctx context.Context, op string, fn func(context.Context) error) error {
	start := time.Now()
	err := fn(ctx)
	f.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	failed := err != nil && !errors.Is(err, sharedstate.ErrTicketUsed) && !errors.Is(err, sharedstate.ErrNotFound) &&
		!isOverLimit(err)
	if failed && ctx.Err() != nil {
		// The request went away (its client hung up): no word on the store.
		f.calls.WithLabelValues(op, "error").Inc()
		return err
	}
	if failed {
		f.calls.WithLabelValues(op, "error").Inc()
		f.upMu.Lock()
		defer f.upMu.Unlock()
		if f.up.Swap(false) {
			f.upGauge.Set(0)
			f.log.Error("gateway: the fleet's shared state is unavailable: tickets are refused (503), limits count on this replica only, resumes of sessions held elsewhere fail until it is back",
				"op", op, "error", err)
		}
		return err
	}
	f.calls.WithLabelValues(op, "ok").Inc()
	if f.up.Load() {
		return err // the common case: no lock
	}
	f.upMu.Lock()
	defer f.upMu.Unlock()
	if !f.up.Swap(true) {
		f.upGauge.Set(1)
		f.log.Info("gateway: the fleet's shared state is back", "op", op)
	}
	return err
}

func isOverLimit(err error) bool {
	var ol *sharedstate.OverLimitError
	return errors.As(err, &ol)
}

// onToken records the resume tokens of this replica's sessions in the
// directory (mux.ResumeRegistry.OnToken): an issued one before the client
// sees it, a forgotten one later, in a batch.
func (f *fleet) onToken(key [32]byte, issued bool) {
	if !issued {
		f.mu.Lock()
		_, ok := f.owned[key]
		delete(f.owned, key)
		f.mu.Unlock()
		if ok {
			select {
			case f.drops <- key:
			default: // full: the record expires (ownerTTL) and its owner answers unknown meanwhile
			}
		}
		return
	}
	f.mu.Lock()
	f.owned[key] = struct{}{}
	f.mu.Unlock()
	_ = f.call(context.Background(), "resume_put", func(ctx context.Context) error {
		return f.store.PutResumeOwner(ctx, key, f.cfg.Replica, ownerTTL)
	})
}

// flushDrops removes the records of forgotten tokens, 1,024 a call.
func (f *fleet) flushDrops(ctx context.Context) {
	for {
		var keys [][32]byte
	batch:
		for len(keys) < 1024 {
			select {
			case k := <-f.drops:
				keys = append(keys, k)
			default:
				break batch
			}
		}
		if len(keys) == 0 {
			return
		}
		if err := f.call(ctx, "resume_drop", func(ctx context.Context) error { return f.store.DropResumeOwners(ctx, keys) }); err != nil {
			return // the records expire (ownerTTL); their owner answers unknown meanwhile
		}
	}
}

// acquireSession takes one of who's sessions on this replica and then
// across the fleet. When the store does not answer, the replica's own
// count decides (fail open to per-replica limits, docs/gateway.md).
func (g *Gateway) acquireSession(ctx context.Context, who string) (func(), error) {
	release, err := g.lim.AcquireSession(who)
	f := g.fleet
	if err != nil || f == nil || g.cfg.Limits.SessionsPerCaller <= 0 {
		return release, err
	}
	id := f.cfg.Replica + "/" + strconv.FormatUint(f.seq.Add(1), 10)
	err = f.call(ctx, "session_acquire", func(ctx context.Context) error {
		return f.store.AcquireSession(ctx, who, f.cfg.Replica, id, g.cfg.Limits.SessionsPerCaller)
	})
	var ol *sharedstate.OverLimitError
	switch {
	case errors.As(err, &ol):
		release()
		g.lim.Refused(ops.LimitSessions)
		return nil, &ops.LimitError{Limit: ops.LimitSessions, Detail: fmt.Sprintf(
			"caller %s already has %d session(s) across the gateway's replicas, the limit per caller (--max-sessions-per-caller): close one first", who, ol.Held)}
	case err != nil:
		return release, nil // logged by call; counted on this replica only
	}
	return func() {
		release()
		f.releaseSession(context.Background(), pendingRelease{who, id})
	}, nil
}

// releaseSession forgets a session in the store, or keeps it for the
// heartbeat to retry (else the caller would lose a slot until this
// replica dies).
func (f *fleet) releaseSession(ctx context.Context, r pendingRelease) {
	if err := f.call(ctx, "session_release", func(ctx context.Context) error {
		return f.store.ReleaseSession(ctx, r.caller, r.session)
	}); err != nil {
		f.mu.Lock()
		if len(f.releases) < 1<<16 {
			f.releases = append(f.releases, r)
		}
		f.mu.Unlock()
	}
}

// allowDial takes one of who's dial tokens from the fleet's bucket, or
// from this replica's when the store does not answer.
func (g *Gateway) allowDial(ctx context.Context, who string) error {
	f := g.fleet
	lim := g.lim.Limits()
	if f == nil || lim.DialsPerSecond <= 0 {
		return g.lim.AllowDial(who)
	}
	var wait time.Duration
	err := f.call(ctx, "dial", func(ctx context.Context) error {
		var err error
		wait, err = f.store.TakeDial(ctx, who, lim.DialsPerSecond, lim.DialBurst)
		return err
	})
	if err != nil {
		return g.lim.AllowDial(who)
	}
	if wait > 0 {
		g.lim.Refused(ops.LimitDials)
		return &ops.LimitError{Limit: ops.LimitDials, RetryAfter: wait, Detail: fmt.Sprintf(
			"caller %s dials faster than %g a second across the gateway's replicas (--max-dials-per-second): retry in %s", who,
			lim.DialsPerSecond, wait.Round(time.Millisecond))}
	}
	return nil
}

// Close stops the gateway's fleet heartbeat and leaves the fleet's
// directory (after the server shut down); without a fleet it does
// nothing.
func (g *Gateway) Close() error {
	if g.fleet != nil {
		g.closeOnce.Do(g.fleet.close)
	}
	return nil
}

// Replica returns the name of this replica in its fleet ("" without one).
func (g *Gateway) Replica() string {
	if g.fleet == nil {
		return ""
	}
	return g.fleet.cfg.Replica
}

// SharedTickets returns the fleet's memory of used tickets for a
// ticket.Verifier's Shared (its calls counted and timed with the other
// calls to the shared state), or nil without a fleet.
func (g *Gateway) SharedTickets() interface {
	UseTicket(ctx context.Context, d [32]byte, exp time.Time) error
} {
	if g.fleet == nil {
		return nil
	}
	return fleetTickets{g.fleet}
}

type fleetTickets struct{ f *fleet }

func (t fleetTickets) UseTicket(ctx context.Context, d [32]byte, exp time.Time) error {
	return t.f.call(ctx, "ticket", func(ctx context.Context) error { return t.f.store.UseTicket(ctx, d, exp) })
}

// tokenKey is the directory's key of a resume token.
func tokenKey(tok string) [32]byte { return sha256.Sum256([]byte(tok)) }
