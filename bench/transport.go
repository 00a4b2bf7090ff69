package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/loopback"
)

// Session is one side of a connection under test.
//
// For a multiplexer it is one session over one loopback TCP connection. For a
// ceiling transport (tcp, ws) there is no multiplexing: the client Session dials
// a new connection for every Open and the server Session accepts one for every
// Accept.
//
// The workloads only ever call Open on the client side and Accept on the server
// side, the way Kubernetes uses httpstream (kubectl creates every stream), so a
// transport does not have to support the other direction.
type Session interface {
	// Open opens a stream to the peer. It returns once the stream is usable;
	// whether the peer has accepted it by then depends on the transport.
	Open() (Stream, error)
	// Accept returns the next stream the peer opened.
	Accept() (Stream, error)
	// Close closes the session and every stream on it. Close may block on a
	// transport that cannot tear down while a peer is stalled (SPDY); the
	// cleanup function returned by Pair never does.
	Close() error
}

// Stream is one bidirectional byte stream.
//
// Every transport implements both closing operations; what they do on the wire
// differs and is documented on each transport:
//
//   - CloseWrite half-closes: the peer reads the data written so far and then
//     io.EOF, this side may go on reading what the peer still writes.
//   - Close ends this side's use of the stream and releases it. A transport
//     whose only close is a half-close (SPDY, yamux) sends its FIN here too;
//     the stream is gone once both sides have closed.
//
// A Stream is used by at most one reader and one writer goroutine at a time;
// Close and CloseWrite may be called concurrently with both.
type Stream interface {
	io.Reader
	io.Writer
	CloseWrite() error
	Close() error
}

// Transport is one entry of the side-by-side comparison.
type Transport struct {
	// Name identifies the transport in benchmark names ("transport=<Name>")
	// and tables: "tcp", "ws", "spdy", "spdy-over-ws", "yamux", "smux",
	// "wsmux", "wsmux-httpstream".
	Name string
	// Ceiling marks a transport without multiplexing that bounds what any
	// multiplexer over it can reach: "tcp" and raw "ws". Each of its streams
	// is a connection of its own.
	Ceiling bool
	// Multiplexed is true when all streams of a Pair share one connection.
	Multiplexed bool
	// Description says in one line what exactly is measured (library,
	// version, configuration); it is printed under the tables.
	Description string
	// MaxStreams bounds how many streams one Pair can hold open at once in
	// this process (file descriptors for the ceilings, a stream limit for a
	// multiplexer); 0 means no bound. Workloads that need more streams either
	// use fewer (IdleStreams, reporting how many) or are skipped (StreamsN).
	MaxStreams int
	// Workloads, if not empty, are the only workloads (by Name) this
	// transport runs; the others skip it. A variant of another transport
	// kept out of most tables sets it.
	Workloads []string
	// Pair sets up a connected client and server Session over loopback TCP
	// (127.0.0.1:0) and returns them with a cleanup function. It reports
	// setup failures through tb (tb.Fatal). cleanup closes both sessions and
	// every underlying connection, waits for the goroutines the transport
	// started and returns within a few seconds even when a peer is stalled;
	// it is safe to call more than once. Goroutines a workload started on
	// the streams end once their Read or Write fails after cleanup.
	//
	// n says what lies between the two (net.go): TLS, an emulated link.
	// Every connection the Pair makes goes through n's wire: wire.pair for
	// one connection made up front, wire.listen and wire.dial (or dialTLS)
	// for a transport that dials its server.
	Pair func(tb testing.TB, n Net) (client, server Session, cleanup func())
}

// order fixes the position of the known transports in All and in tables:
// ceilings first, then the Kubernetes SPDY path, the general-purpose peers and
// wsmux. Transports not listed come after, sorted by name.
var order = []string{"tcp", "ws", "spdy", "spdy-over-ws", "yamux", "smux", "wsmux", "wsmux-httpstream"}

var (
	registryMu sync.Mutex
	registry   []Transport
)

// Register adds a transport to the comparison. It is meant to be called from
// an init function in this package, one file per transport
// (transport_<name>.go). It panics on an empty or duplicate name or a nil Pair.
//
// wsmux plugs in the same way, from a file of this package importing its mux
// and adapters/httpstream packages:
//
//	func init() {
//		Register(Transport{Name: "wsmux", Multiplexed: true, Description: "...", Pair: wsmuxPair})
//		Register(Transport{Name: "wsmux-httpstream", Multiplexed: true, Description: "...", Pair: wsmuxHTTPStreamPair})
//	}
//
// Pair should run over tcpPair (one loopback TCP connection, both ends added
// to a connSet that the cleanup closes) with the WebSocket handshake done, and
// allow at least 10,001 concurrent streams so that Streams1024 and IdleStreams
// measure the same thing as for the other multiplexers (or set MaxStreams).
// The httpstream adapter can reuse newHTTPStreamServer and newHTTPStreamClient
// (transport_httpstream.go), which drive any k8s.io/streaming
// httpstream.Connection the way the spdy transports are driven.
func Register(t Transport) {
	if t.Name == "" || t.Pair == nil {
		panic("bench: Register needs a Name and a Pair")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	for _, r := range registry {
		if r.Name == t.Name {
			panic("bench: transport " + t.Name + " registered twice")
		}
	}
	registry = append(registry, t)
}

// All returns the registered transports in a stable order (see order).
func All() []Transport {
	registryMu.Lock()
	out := slices.Clone(registry)
	registryMu.Unlock()
	rank := func(name string) int {
		if i := slices.Index(order, name); i >= 0 {
			return i
		}
		return len(order)
	}
	slices.SortStableFunc(out, func(a, b Transport) int {
		if ra, rb := rank(a.Name), rank(b.Name); ra != rb {
			return ra - rb
		}
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// runs reports whether tr runs w (see Transport.Workloads).
func (tr Transport) runs(w Workload) bool {
	return len(tr.Workloads) == 0 || slices.Contains(tr.Workloads, w.Name)
}

// Lookup returns the registered transport with the given name.
func Lookup(name string) (Transport, bool) {
	for _, t := range All() {
		if t.Name == name {
			return t, true
		}
	}
	return Transport{}, false
}

// errNotSupported is returned by Open on a server session and Accept on a
// client session of transports that only support client-initiated streams.
var errNotSupported = errors.New("bench: not supported by this side of the transport")

// connSet tracks the raw connections of a Pair so that cleanup can close them
// all, whatever state the protocol on top is in.
type connSet struct {
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newConnSet() *connSet { return &connSet{conns: make(map[net.Conn]struct{})} }

// add tracks c; it closes c and returns false once the set is closed.
func (s *connSet) add(c net.Conn) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.Close()
		return false
	}
	s.conns[c] = struct{}{}
	s.mu.Unlock()
	return true
}

func (s *connSet) remove(c net.Conn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
}

// closeAll closes every tracked connection and every one added later.
func (s *connSet) closeAll() {
	s.mu.Lock()
	s.closed = true
	conns := s.conns
	s.conns = make(map[net.Conn]struct{})
	s.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// listen opens a loopback TCP listener on an ephemeral port.
func listen(tb testing.TB) net.Listener {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("bench: listen: %v", err)
	}
	return ln
}

// tcpPair returns both ends of one loopback TCP connection, the client end
// first. Both are added to conns. Transports use wire.pair, which adds the
// Net's link and TLS.
func tcpPair(tb testing.TB, conns *connSet) (client, server net.Conn) {
	tb.Helper()
	client, server, err := loopback.Pair()
	if err != nil {
		tb.Fatalf("bench: loopback connection: %v", err)
	}
	conns.add(client)
	conns.add(server)
	return client, server
}

// closeBounded runs the close functions concurrently, tracked by wg, and waits
// up to d for them; it reports whether they all returned. Those still running
// keep running (the caller closes the raw connections to unblock them and then
// waits on wg again).
func closeBounded(d time.Duration, wg *sync.WaitGroup, fns ...func() error) bool {
	for _, fn := range fns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fn()
		}()
	}
	return waitTimeout(wg, d)
}

// waitTimeout waits for wg up to d and reports whether it finished.
func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// muxCleanup is the cleanup of a multiplexer over one TCP connection: close
// both sessions (bounded, in case one blocks behind a stalled peer), then the
// raw connections, then wait for the session Close calls to return.
func muxCleanup(tb testing.TB, name string, conns *connSet, closers ...func() error) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			var closing sync.WaitGroup
			closeBounded(time.Second, &closing, closers...)
			conns.closeAll()
			if !waitTimeout(&closing, 10*time.Second) {
				tb.Errorf("bench: %s: session Close still blocked 10 s after its connections were closed", name)
			}
		})
	}
}

// mustf fails tb with a formatted message when err is not nil.
func mustf(tb testing.TB, err error, format string, args ...any) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("bench: %s: %v", fmt.Sprintf(format, args...), err)
	}
}
