// Package conformance is one suite of Kubernetes httpstream behaviour, written
// from the semantics in adapters/README.md ("Kubernetes semantics that must hold"), that
// any implementation of k8s.io/streaming/pkg/httpstream.Connection can be run
// against: the SPDY adapter from k8s.io/streaming and wsmux's adapter run the
// same subtests, so every difference shows as a named subtest.
//
// Every check returns an error instead of calling t.Fatal, so that a check an
// implementation is known to fail (see [Known]) is still run, bounded by a
// deadline, and reported as a known difference rather than a failure or a
// hang. A known difference that unexpectedly passes is logged.
//
// It imports only k8s.io/streaming's httpstream interfaces and testing, and
// must not import mux or any transport: the suite sees an implementation only
// through httpstream.Connection. Tests only.
package conformance

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"testing"
	"time"

	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// Factory returns a connected client/server pair over a real transport
// (loopback TCP or an upgraded HTTP connection). handler is the server's
// NewStreamHandler. The suite closes both connections when a check ends; the
// factory registers any other cleanup (listeners, sockets) with t.Cleanup.
type Factory func(t testing.TB, handler k8shttpstream.NewStreamHandler) (client, server k8shttpstream.Connection)

// Known maps a check name to the reason an implementation is expected to
// differ. Such a check still runs (bounded); its failure is reported with
// t.Skip and the reason, its success with a log line.
type Known map[string]string

// Results collects the outcomes of parallel subtests.
type Results struct {
	mu sync.Mutex
	rs []Result
}

func (r *Results) add(x Result) { r.mu.Lock(); r.rs = append(r.rs, x); r.mu.Unlock() }

// Sorted returns the results by check name; call it after the subtests ended.
func (r *Results) Sorted() []Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := append([]Result(nil), r.rs...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Result is the outcome of one check, for tables.
type Result struct {
	Name    string
	Outcome string // "pass", "FAIL", "known-difference", "known-but-passed", "not run"
	Detail  string
}

// Check is one conformance check.
type Check struct {
	Name string
	// Handler, if set, replaces the default server handler (which accepts
	// every stream and hands it to env.Accepted).
	Handler func(e *Env, s k8shttpstream.Stream, replySent <-chan struct{}) error
	Run     func(e *Env) error
	// Timeout bounds the whole check; default 20 s.
	Timeout time.Duration
}

// Env is what a check gets: the pair and the server's accepted streams.
type Env struct {
	T        testing.TB
	Client   k8shttpstream.Connection
	Server   k8shttpstream.Connection
	Accepted chan k8shttpstream.Stream
	// Done is closed when the check ends (its deadline or return); blocking
	// handlers select on it so that nothing is left behind.
	Done chan struct{}

	mu     sync.Mutex
	values map[string]any
}

// Set and Get let a check's Handler and Run share state.
func (e *Env) Set(k string, v any) { e.mu.Lock(); e.values[k] = v; e.mu.Unlock() }

// Get returns what Set stored.
func (e *Env) Get(k string) any { e.mu.Lock(); defer e.mu.Unlock(); return e.values[k] }

// AcceptOne waits for the next server-side stream.
func (e *Env) AcceptOne(d time.Duration) (k8shttpstream.Stream, error) {
	select {
	case s := <-e.Accepted:
		return s, nil
	case <-time.After(d):
		return nil, errors.New("timed out waiting for the server to accept a stream")
	}
}

// Open creates a client stream with one header and waits for its server side.
func (e *Env) Open(name string) (client, server k8shttpstream.Stream, err error) {
	h := http.Header{}
	h.Set("X-Conformance", name)
	c, err := e.Client.CreateStream(h)
	if err != nil {
		return nil, nil, fmt.Errorf("CreateStream(%s): %w", name, err)
	}
	s, err := e.AcceptOne(5 * time.Second)
	if err != nil {
		return nil, nil, err
	}
	if got := s.Headers().Get("X-Conformance"); got != name {
		return nil, nil, fmt.Errorf("server stream header X-Conformance = %q, want %q", got, name)
	}
	return c, s, nil
}

// Run runs every check in Checks() against f as subtests of t.
// Checks named in skip are not run (reported as "not run"): for costly
// checks in configurations that add nothing to them.
func Run(t *testing.T, f Factory, known Known, skip ...string) *Results {
	results := &Results{}
	for _, c := range Checks() {
		t.Run(c.Name, func(t *testing.T) {
			for _, s := range skip {
				if s == c.Name {
					results.add(Result{Name: c.Name, Outcome: "not run"})
					t.Skip("not run in this configuration (cost)")
				}
			}
			t.Parallel()
			r := RunCheck(t, f, c, known[c.Name])
			results.add(r)
			switch r.Outcome {
			case "FAIL":
				t.Fatal(r.Detail)
			case "known-difference":
				t.Skipf("known difference: %s (observed: %s)", known[c.Name], r.Detail)
			case "known-but-passed":
				t.Logf("listed as a known difference (%s) but passed", known[c.Name])
			}
		})
	}
	return results
}

// RunAndReport runs the suite in parallel subtests and logs the result table
// (column name column) once they have all finished.
func RunAndReport(t *testing.T, column string, f Factory, known Known, skip ...string) {
	var rs *Results
	t.Run("checks", func(t *testing.T) { rs = Run(t, f, known, skip...) })
	t.Log("\n" + Table(column, rs.Sorted()))
}

// RunCheck runs one check on a fresh pair and classifies the outcome.
func RunCheck(t testing.TB, f Factory, c Check, knownReason string) Result {
	e := &Env{
		T:        t,
		Accepted: make(chan k8shttpstream.Stream, 1024),
		Done:     make(chan struct{}),
		values:   map[string]any{},
	}
	handler := func(s k8shttpstream.Stream, replySent <-chan struct{}) error {
		if c.Handler != nil {
			return c.Handler(e, s, replySent)
		}
		e.Accepted <- s
		return nil
	}
	e.Client, e.Server = f(t, handler)
	timeout := c.Timeout
	if timeout == 0 {
		timeout = 20 * time.Second
	}
	errc := make(chan error, 1)
	go func() { errc <- c.Run(e) }()
	var err error
	finished := false
	select {
	case err = <-errc:
		finished = true
	case <-time.After(timeout):
		err = fmt.Errorf("check did not finish within %v", timeout)
	}
	close(e.Done)
	// Tear down; the check's goroutine (if it timed out) unblocks once the
	// connections are closed.
	_ = e.Client.Close()
	_ = e.Server.Close()
	if !finished {
		select {
		case <-errc:
		case <-time.After(10 * time.Second):
			err = fmt.Errorf("%v; and the check goroutine did not end within 10 s of closing both connections", err)
		}
	}
	r := Result{Name: c.Name}
	switch {
	case err == nil && knownReason == "":
		r.Outcome = "pass"
	case err == nil:
		r.Outcome = "known-but-passed"
	case knownReason != "":
		r.Outcome, r.Detail = "known-difference", err.Error()
	default:
		r.Outcome, r.Detail = "FAIL", err.Error()
	}
	return r
}

// Table renders results as a markdown table column.
func Table(column string, rs []Result) string {
	s := fmt.Sprintf("| check | %s |\n|---|---|\n", column)
	for _, r := range rs {
		s += fmt.Sprintf("| %s | %s |\n", r.Name, r.Outcome)
	}
	return s
}

// SPDYKnown lists where the SPDY adapter (k8s.io/streaming/pkg/httpstream/spdy
// over moby/spdystream) differs from adapters/README.md's semantics. Any connection
// with a SPDY leg (directly or behind a bridge) inherits them.
var SPDYKnown = Known{
	ResetSeenByPeer:                  "spdystream: after the peer's RST_STREAM the local Write keeps succeeding (the data is dropped)",
	PendingCreateStreamFailsPromptly: "spdystream waits the full 30 s createStreamResponseTimeout for a SYN_REPLY even after the connection is closed",
	CreateStreamAfterConnClosed:      "flaky with spdystream: a CreateStream just after CloseChan fired sometimes still sends its SYN_STREAM and waits the 30 s reply timeout",
	LargeWrite:                       "spdystream rejects a single Write larger than its 16 MiB max data frame",
	SlowReaderIsolation:              "spdystream has no flow control: a never-read stream blocks a frame queue and then the read loop, stalling every stream (kubernetes#96339)",
}

// Subset returns the entries of k named in names.
func (k Known) Subset(names ...string) Known {
	out := Known{}
	for _, n := range names {
		if r, ok := k[n]; ok {
			out[n] = r
		}
	}
	return out
}
