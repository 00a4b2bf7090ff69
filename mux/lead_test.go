package mux

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	crand "crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"math/big"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/assert"
	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/internal/loopback"
)

// Leader reads (driver_fastpaths_lead.go): a Read that waits reads the socket itself.

// leadEvent is what leadHook saw, with s.mu held.
type leadEvent struct {
	period   time.Duration // leadHook's: 0 a leader waits, -1 the reader looks for a Read, >0 a check
	leader   *Stream
	leadWant *Stream
	tok      int8
}

// leadWatch maps a *Session to the chan leadEvent its leadHook calls go to.
var leadWatch sync.Map

// watchedLeadHook is leadHook in tests (TestMain): it reports to the
// session's watcher, if any, and never blocks (it runs under s.mu).
func watchedLeadHook(d *fastDriver, period time.Duration) {
	if ch, ok := leadWatch.Load(d.s); ok {
		select {
		case ch.(chan leadEvent) <- leadEvent{period, d.leader, d.leadWant, d.tok}:
		default:
			panic("leadEvent watcher too slow")
		}
	}
}

// watchLead returns the events of s's token from now until stop.
func watchLead(s *Session) (events <-chan leadEvent, stop func()) {
	ch := make(chan leadEvent, 1<<12)
	leadWatch.Store(s, ch)
	return ch, func() { leadWatch.Delete(s) }
}

// awaitLead returns once a Read of st leads: it holds the token and is
// about to wait on the socket. The reader goroutine hands the token to a
// waiting Read only after it has read a message and has no bytes left, so
// poke makes the peer send one: at the start, and whenever st's Read
// registered as waiting while the reader goroutine was back on the socket
// with no poke of ours on its way. One poke at a time: no flood, no
// polling.
func awaitLead(t *testing.T, s *Session, st *Stream, poke func()) {
	t.Helper()
	events, stop := watchLead(s)
	defer stop()
	poke()
	outstanding := true // a poke the reader goroutine has not read yet
	for ev := range events {
		switch ev.period {
		case 0:
			if ev.leader == st {
				return
			}
		case -1:
			outstanding = false
		case -2:
			if !outstanding && ev.leadWant == st && ev.tok == tokReader {
				poke()
				outstanding = true
			}
		}
	}
}

// Request/response over TCP: after the first exchanges, the waiting Reads
// on both sides read the socket themselves, and every byte arrives.
func TestLeaderEcho(t *testing.T) {
	for _, transport := range leaderTransports {
		t.Run(transport, func(t *testing.T) { leaderEcho(t, transport) })
	}
}

func leaderEcho(t *testing.T, transport string) {
	cs, ss := leaderPair(t, transport, nil, nil)
	go echoServer(ss)
	st, err := cs.Open(context.Background(), nil)
	require.NoError(t, err)
	const rounds = 2000
	rng := rand.New(rand.NewPCG(5, 6))
	for i := range rounds {
		req := make([]byte, 1+rng.IntN(2000))
		for j := range req {
			req[j] = byte(rng.Uint32())
		}
		_, err := st.Write(req)
		require.NoError(t, err)
		resp := make([]byte, len(req))
		_, err = io.ReadFull(st, resp)
		require.NoError(t, err)
		require.Equal(t, req, resp, "round %d", i)
	}
	c, s := cs.Stats().LeaderMessages, ss.Stats().LeaderMessages
	t.Logf("leader messages: client %d, server %d of %d", c, s, rounds)
	require.Greater(t, c, uint64(rounds/2), "the client's Reads lead")
	require.Greater(t, s, uint64(rounds/2), "the server's Reads lead")
}

// A Read that leads (waits in the socket) returns at once when something
// else must end it.
func TestLeaderInterrupted(t *testing.T) {
	tests := []struct {
		name  string
		do    func(st, peer *Stream, cs *Session)
		check func(t *testing.T, err error)
	}{
		{"Reset", func(st, _ *Stream, _ *Session) { _ = st.Reset(frame.Cancel) }, func(t *testing.T, err error) {
			var se *StreamError
			require.ErrorAs(t, err, &se)
			require.False(t, se.Remote)
		}},
		{"CloseRead", func(st, _ *Stream, _ *Session) { _ = st.CloseRead() }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, ErrStreamClosed)
		}},
		{"SetReadDeadline", func(st, _ *Stream, _ *Session) { _ = st.SetReadDeadline(time.Now().Add(20 * time.Millisecond)) }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, ErrTimeout)
		}},
		{"SetDeadline in the past", func(st, _ *Stream, _ *Session) { _ = st.SetDeadline(time.Now().Add(-time.Second)) }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, ErrTimeout)
		}},
		{"session Close", func(_, _ *Stream, cs *Session) { go cs.Close() }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, ErrSessionClosed)
		}},
		{"peer Reset", func(_, peer *Stream, _ *Session) { _ = peer.Reset(frame.ErrorCode(0x1001)) }, func(t *testing.T, err error) {
			var se *StreamError
			require.ErrorAs(t, err, &se)
			require.True(t, se.Remote)
			require.Equal(t, frame.ErrorCode(0x1001), se.Code)
		}},
		{"peer FIN", func(_, peer *Stream, _ *Session) { _ = peer.Close() }, func(t *testing.T, err error) {
			require.ErrorIs(t, err, io.EOF)
		}},
	}
	for _, transport := range leaderTransports {
		for _, tt := range tests {
			t.Run(transport+"/"+tt.name, func(t *testing.T) {
				leaderInterrupted(t, transport, tt.do, tt.check)
			})
		}
	}
}

func leaderInterrupted(t *testing.T, transport string, do func(st, peer *Stream, cs *Session), check func(t *testing.T, err error)) {
	{
		{
			cs, ss := leaderPair(t, transport, nil, nil)
			st, peer := openPair(t, cs, ss)
			// One exchange so that the client's Read leads.
			_, err := peer.Write([]byte("x"))
			require.NoError(t, err)
			done := make(chan error, 1)
			go func() {
				buf := make([]byte, 10)
				if _, err := st.Read(buf); err != nil {
					done <- err
					return
				}
				_, err := st.Read(buf) // waits: nothing more comes
				done <- err
			}()
			// Pings give the client's reader goroutine a message after
			// which it hands the socket over.
			awaitLead(t, cs, st, func() {
				_, err := cs.Ping(context.Background()) // a message for the reader goroutine
				require.NoError(t, err)
			})
			// Nothing else comes: only the interruption can end the
			// leading Read (a missed one hangs here).
			do(st, peer, cs)
			check(t, <-done)
		}
	}
}

// Interrupts racing with arriving data lose no byte: one goroutine Reads
// (and leads), another keeps setting and clearing read deadlines, which
// interrupt it, while the peer sends 4 MiB in random pieces.
func TestLeaderInterruptsKeepBytes(t *testing.T) {
	for _, transport := range leaderTransports {
		t.Run(transport, func(t *testing.T) { leaderInterruptsKeepBytes(t, transport) })
	}
}

func leaderInterruptsKeepBytes(t *testing.T, transport string) {
	cs, ss := leaderPair(t, transport, nil, nil)
	st, peer := openPair(t, cs, ss)
	const total = 4 << 20
	want := sha256.New()
	go func() {
		rng := rand.New(rand.NewPCG(7, 8))
		sent := 0
		for sent < total {
			p := make([]byte, min(1+rng.IntN(3000), total-sent))
			for j := range p {
				p[j] = byte(rng.Uint32())
			}
			want.Write(p)
			if _, err := peer.Write(p); err != nil {
				return
			}
			sent += len(p)
			if rng.IntN(8) == 0 {
				yield(rng.IntN(20)) // a pause: the reader may catch up
			}
		}
		_ = peer.Close()
	}()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(9, 10))
		for {
			select {
			case <-stop:
				_ = st.SetReadDeadline(time.Time{})
				return
			default:
			}
			_ = st.SetReadDeadline(time.Now().Add(time.Duration(rng.IntN(300)) * time.Microsecond))
			yield(rng.IntN(30))
			_ = st.SetReadDeadline(time.Time{})
			yield(rng.IntN(30))
		}
	}()
	got := sha256.New()
	buf := make([]byte, 5000)
	n, timeouts := 0, 0
	for {
		k, err := st.Read(buf)
		got.Write(buf[:k])
		n += k
		if errors.Is(err, ErrTimeout) {
			timeouts++
			yield(5) // let the deadline be cleared
			continue
		}
		if err == io.EOF {
			break
		}
		require.NoError(t, err)
	}
	close(stop)
	wg.Wait()
	require.Equal(t, total, n)
	require.Equal(t, want.Sum(nil), got.Sum(nil))
	t.Logf("%d timeouts, %d leader messages", timeouts, cs.Stats().LeaderMessages)
	require.NotZero(t, cs.Stats().LeaderMessages)
}

// yield gives up the processor n times: a pause of no fixed length that
// lets other goroutines run, on no clock.
func yield(n int) {
	for range n {
		runtime.Gosched()
	}
}

// A free token (its last leader drained its stream and went away) is taken
// back when nothing else waits on the socket: a server whose streams are
// run by a Handler still accepts new streams.
func TestLeaderFreeTokenComesBack(t *testing.T) {
	got := make(chan *Stream, 4)
	hold := make(chan struct{})
	defer close(hold)
	scfg := &Config{Handler: func(st *Stream) error {
		go func() {
			buf := make([]byte, 1)
			if _, err := st.Read(buf); err == nil {
				got <- st
			}
			<-hold // read once, then never again
		}()
		return nil
	}}
	cs, ss := tcpPair(t, fastPaths(nil), fastPaths(scfg))
	for i := range 3 {
		st, err := cs.Open(context.Background(), nil)
		require.NoError(t, err, "open %d", i)
		_, err = st.Write([]byte{1})
		require.NoError(t, err)
		<-got // the server read its byte (a hang otherwise)
		ss.mu.Lock()
		t.Logf("server token after stream %d: %d", i, ss.fastPaths().tok)
		ss.mu.Unlock()
	}
}

// A leader's read that fails (the peer's connection ends) ends the session
// like a failure of the reader goroutine; nothing is left running.
func TestLeaderReadFails(t *testing.T) {
	conn, raw := tcpConns(t)
	cs, err := Client(conn, fastPaths(nil))
	require.NoError(t, err)
	defer cs.Close()
	peer := newRawPeer(t, raw, false)
	go peer.drain()
	require.NoError(t, peer.send(settingsMsg()))
	st, err := cs.OpenEarly(nil)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := st.Read(make([]byte, 1))
		done <- err
	}()
	awaitLead(t, cs, st, func() { require.NoError(t, peer.send(frame.AppendPing(nil, false, 1))) })
	_ = raw.(*net.TCPConn).SetLinger(0)
	_ = raw.Close()
	require.Error(t, <-done, "the Read ends")
	<-cs.Done() // the session ends
	require.Error(t, cs.Err())
}

// tcpConns returns both ends of a loopback TCP connection.
func tcpConns(t testing.TB) (net.Conn, net.Conn) {
	t.Helper()
	a, b, err := loopback.Pair()
	require.NoError(t, err)
	return a, b
}

// leaderTransports are the connections leader reads are used on.
var leaderTransports = []string{"tcp", "tls"}

// leaderPair starts a client and a server session over loopback TCP, with
// TLS on top for "tls".
func leaderPair(t testing.TB, transport string, ccfg, scfg *Config) (*Session, *Session) {
	t.Helper()
	if transport == "tcp" {
		return tcpPair(t, fastPaths(ccfg), fastPaths(scfg))
	}
	a, b := tcpConns(t)
	cert := selfSigned(t)
	pool := x509.NewCertPool()
	pool.AddCert(cert.Leaf)
	tc := tls.Client(a, &tls.Config{RootCAs: pool, ServerName: "wsmux.test", MinVersion: tls.VersionTLS13})
	ts := tls.Server(b, &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS13})
	errc := make(chan error, 1)
	go func() { errc <- ts.Handshake() }()
	require.NoError(t, tc.Handshake())
	require.NoError(t, <-errc)
	cs, err := Client(tc, fastPaths(ccfg))
	require.NoError(t, err)
	ss, err := Server(ts, fastPaths(scfg))
	require.NoError(t, err)
	require.True(t, cs.leaderReads() && ss.leaderReads(), "leader reads are used over TLS")
	require.False(t, cs.e.Splicing(), "no splicing over TLS")
	t.Cleanup(func() {
		cs.Close()
		ss.Close()
	})
	return cs, ss
}

// selfSigned returns a certificate for wsmux.test, made now.
func selfSigned(t testing.TB) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), crand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		DNSNames:     []string{"wsmux.test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(crand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	leaf, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}
}

// A Read that waits long on an idle stream costs the reader goroutine a few
// checks, not one a millisecond: while the leader waits, each check sets
// the next one twice as far (up to leadCheckMax). Once that Read returns
// and leaves the token free, the reader goroutine's next check comes
// within leadCheck, and it takes the token back for the new stream's SYN.
func TestLeaderIdleChecksBackOff(t *testing.T) {
	cs, ss := tcpPair(t, fastPaths(nil), fastPaths(nil))
	st, peer := openPair(t, cs, ss)
	got := make(chan error, 1)
	go func() {
		_, err := st.Read(make([]byte, 10))
		got <- err
	}()
	awaitLead(t, cs, st, func() {
		_, err := cs.Ping(context.Background())
		require.NoError(t, err)
	})
	events, stop := watchLead(cs)
	var periods []time.Duration
	for ev := range events {
		if ev.period > 0 {
			require.Equal(t, st, ev.leader, "the leader waits on")
			periods = append(periods, ev.period)
			if len(periods) == 8 {
				break
			}
		}
	}
	stop()
	t.Logf("check periods with a leader waiting: %v", periods)
	for i := 1; i < len(periods); i++ {
		require.Equal(t, min(2*periods[i-1], leadCheckMax), periods[i], "the checks back off: %v", periods)
	}

	_, err := peer.Write([]byte("x"))
	require.NoError(t, err)
	require.NoError(t, <-got)
	// Nobody reads or waits on the client now: only the reader goroutine
	// can take the new stream's SYN and answer it. The Read left the token
	// free and brought the reader goroutine's check near (or it took the
	// token back already).
	cs.mu.Lock()
	if cs.fastPaths().tok != tokReader {
		require.Equal(t, tokFree, cs.fastPaths().tok)
		require.LessOrEqual(t, cs.fastPaths().tickDue-cs.now(), leadCheck, "the next check is near")
	}
	cs.mu.Unlock()
	_, err = ss.Open(context.Background(), nil)
	require.NoError(t, err)
}

// While several streams receive at once, their Reads leave the socket to
// the reader goroutine: a leader would pass the token from Read to Read,
// the socket unread between them (docs/performance-history.md, "Few
// bulk streams"). Every byte still arrives.
func TestLeaderNotWhileManyReceive(t *testing.T) {
	cs, ss := leaderPair(t, "tcp", nil, nil)
	const streams, size, chunk = 2, 4 << 20, 32 << 10
	var ws, rs []*Stream
	for range streams {
		w, r := openPair(t, cs, ss)
		ws, rs = append(ws, w), append(rs, r)
	}
	// Count the leaders that wait on the socket from the first byte on.
	events, stop := watchLead(ss)
	done, leads := make(chan struct{}), make(chan int)
	go func() {
		n := 0
		for {
			select {
			case ev := <-events:
				if ev.period == 0 {
					n++
				}
			case <-done:
				leads <- n
				return
			}
		}
	}()
	var wg sync.WaitGroup
	sums := make([][32]byte, streams)
	got := make([][32]byte, streams)
	data := make([][]byte, streams)
	for i := range data {
		data[i] = make([]byte, size)
		rng := rand.New(rand.NewPCG(uint64(i), 7))
		for j := range data[i] {
			data[i][j] = byte(rng.Uint32())
		}
		sums[i] = sha256.Sum256(data[i])
	}
	for i := range streams {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for p := data[i]; len(p) > 0; p = p[chunk:] {
				if _, err := ws[i].Write(p[:chunk]); !assert.NoError(t, err) {
					return
				}
			}
			assert.NoError(t, ws[i].CloseWrite())
		}()
		go func() {
			defer wg.Done()
			h := sha256.New()
			_, err := io.CopyBuffer(h, rs[i], make([]byte, chunk))
			assert.NoError(t, err)
			copy(got[i][:], h.Sum(nil))
		}()
	}
	wg.Wait()
	stop()
	close(done)
	n := <-leads
	require.Equal(t, sums, got, "every stream's bytes arrive")
	in := ss.Stats().MessagesIn
	t.Logf("%d leader waits, %d messages", n, in)
	// The last stream to finish may lead once alone, as it should.
	require.Less(t, uint64(n), in/2, "the reader goroutine reads the socket")
}
