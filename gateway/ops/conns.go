package ops

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of ConnLimits.
const (
	// DefaultMaxConns bounds a listener's open connections.
	DefaultMaxConns = 10000
	// DefaultIdleTimeout closes keep-alive connections idle this long.
	DefaultIdleTimeout = 2 * time.Minute
	// DefaultReadHeaderTimeout bounds reading a request's head.
	DefaultReadHeaderTimeout = 10 * time.Second
)

// ConnLimits bound the HTTP connections of one listener. Zero fields take
// their defaults.
type ConnLimits struct {
	// MaxConns bounds the connections open at once on the listener: those
	// waiting for a request or in one, plus the sessions upgraded ones
	// became. A connection accepted beyond it is closed at once (a TCP
	// reset) and counted in wsmux_connections_refused_total. 0:
	// DefaultMaxConns; negative: no limit.
	MaxConns int
	// IdleTimeout closes a keep-alive connection that has waited this
	// long for its next request (upgraded connections are not affected).
	// 0: DefaultIdleTimeout.
	IdleTimeout time.Duration
	// ReadHeaderTimeout closes a connection whose request head has not
	// arrived whole within this long. 0: DefaultReadHeaderTimeout.
	ReadHeaderTimeout time.Duration
}

// WithDefaults returns l with its zero fields set to the defaults.
func (l ConnLimits) WithDefaults() ConnLimits {
	if l.MaxConns == 0 {
		l.MaxConns = DefaultMaxConns
	}
	if l.IdleTimeout == 0 {
		l.IdleTimeout = DefaultIdleTimeout
	}
	if l.ReadHeaderTimeout == 0 {
		l.ReadHeaderTimeout = DefaultReadHeaderTimeout
	}
	return l
}

// Validate reports a negative timeout.
func (l ConnLimits) Validate() error {
	switch {
	case l.IdleTimeout < 0:
		return fmt.Errorf("idle timeout %s: want a positive duration", l.IdleTimeout)
	case l.ReadHeaderTimeout < 0:
		return fmt.Errorf("read header timeout %s: want a positive duration", l.ReadHeaderTimeout)
	}
	return nil
}

// Apply sets srv's idle and read-header timeouts (defaults for zero
// fields).
func (l ConnLimits) Apply(srv *http.Server) {
	l = l.WithDefaults()
	srv.IdleTimeout = l.IdleTimeout
	srv.ReadHeaderTimeout = l.ReadHeaderTimeout
}

// refusalLogEvery spaces the log lines of a listener at its limit: a
// flood of connections is one line per interval, not one per connection.
const refusalLogEvery = 10 * time.Second

// ConnGate counts the open connections of one listener against its
// limit; see LimitListener.
type ConnGate struct {
	name    string
	max     int
	held    func() int
	refused prometheus.Counter
	log     *slog.Logger

	open    atomic.Int64 // HTTP connections accepted and not yet closed or hijacked
	lastLog atomic.Int64 // unix nanoseconds of the last refusal logged
	since   atomic.Int64 // refusals since then
}

// NewConnGate returns the gate of the listener named name (the label of
// wsmux_connections_open and wsmux_connections_refused_total) holding at
// most max connections (<= 0: no limit). held, when set, returns how many
// connections the listener's upgrades hold (its live sessions), counted
// against max with the HTTP ones. m and log may be nil.
func NewConnGate(name string, max int, held func() int, m *Metrics, log *slog.Logger) (*ConnGate, error) {
	g := &ConnGate{name: name, max: max, held: held, log: log}
	if m != nil {
		if name == "" {
			return nil, errors.New("ops: a connection gate with metrics needs a name")
		}
		g.refused = m.ConnsRefused.WithLabelValues(name)
		open := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "wsmux_connections_open", Help: "Connections open on a listener: HTTP ones (waiting for a request or in one) and the sessions upgraded ones became, by listener.",
			ConstLabels: prometheus.Labels{"listener": name},
		}, func() float64 { return float64(g.Open()) })
		if err := m.Registry.Register(open); err != nil {
			return nil, fmt.Errorf("ops: listener %q: %w", name, err)
		}
	}
	return g, nil
}

// Open returns the connections counted: the HTTP ones and the held ones.
func (g *ConnGate) Open() int {
	n := int(g.open.Load())
	if g.held != nil {
		n += g.held()
	}
	return n
}

// acquire counts a new connection, or refuses it (counted, logged) when
// the listener holds its limit.
func (g *ConnGate) acquire() bool {
	if g.max > 0 && g.Open() >= g.max {
		g.refuse()
		return false
	}
	g.open.Add(1)
	return true
}

// release returns a connection's slot.
func (g *ConnGate) release() { g.open.Add(-1) }

func (g *ConnGate) refuse() {
	if g.refused != nil {
		g.refused.Inc()
	}
	n := g.since.Add(1)
	now := time.Now().UnixNano()
	last := g.lastLog.Load()
	if g.log == nil || (last != 0 && now-last < int64(refusalLogEvery)) || !g.lastLog.CompareAndSwap(last, now) {
		return
	}
	g.since.Add(-n)
	g.log.Warn("at the connection limit: new connections are closed at once; raise --max-connections if the load is legitimate",
		"listener", g.name, "limit", g.max, "refused", n)
}

// Acquire counts a connection served outside LimitListener (a handed-off
// one): ok is false when the limit is reached (counted and logged);
// release, idempotent, returns its slot.
func (g *ConnGate) Acquire() (release func(), ok bool) {
	if !g.acquire() {
		return nil, false
	}
	var once sync.Once
	return func() { once.Do(g.release) }, true
}

// LimitListener returns ln with every accepted connection counted by g,
// and those beyond its limit closed at once (a reset: no descriptor or
// kernel state is kept for them); hook must be the http.Server's
// ConnState: it returns a connection's slot once the server closed it or
// handed it to an upgrade (hijacked; g's held counts it from then on).
// Counting by the server's events, not by wrapping the connections, keeps
// the connections the upgrades get the plain *net.TCPConn (or *tls.Conn
// over one) whose fast paths mux uses.
func LimitListener(ln net.Listener, g *ConnGate) (limited net.Listener, hook func(net.Conn, http.ConnState)) {
	return &limitListener{Listener: ln, g: g}, func(_ net.Conn, st http.ConnState) {
		if st == http.StateClosed || st == http.StateHijacked {
			g.release()
		}
	}
}

type limitListener struct {
	net.Listener
	g *ConnGate
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.g.acquire() {
			return c, nil
		}
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetLinger(0)
		}
		_ = c.Close()
	}
}
