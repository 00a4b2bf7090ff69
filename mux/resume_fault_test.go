package mux

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// faultSeed is the seed of the fault-injection test's cut plan:
// WSMUX_FAULT_SEED when set (to replay a logged failure), else drawn.
func faultSeed(t *testing.T) uint64 {
	if v := os.Getenv("WSMUX_FAULT_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("WSMUX_FAULT_SEED=%q: %v", v, err)
		}
		return n
	}
	return rand.Uint64()
}

// TestResumeFaultInjection: a client and a server with resumption on,
// through a proxy that cuts the TCP connection again and again at byte
// offsets it draws (inside WebSocket frame headers, inside messages, at
// any byte including the resume's own HTTP handshake; both directions),
// while faultStreams streams move faultSize bytes each way and an
// interactive stream echoes small messages. Every stream's bytes arrive
// whole both ways (sha256), every echo comes back unchanged, the
// session never fails. The seed is logged: WSMUX_FAULT_SEED=<seed>
// replays the same plan of cuts (the offsets; where the scheduler puts
// them in time may differ).
//
// It runs on the default driver (the fast paths: direct writes, leader
// reads), on the goroutine driver and on the event loop. The full size (64 x 16 MiB each way)
// runs in the non-race pass of make test; under -race, 8 x 1 MiB.
func TestResumeFaultInjection(t *testing.T) {
	streams, size := 64, 16<<20
	if raceEnabled || testing.Short() {
		streams, size = 8, 1<<20
	}
	for _, drv := range []Driver{DriverFastPaths, DriverGoroutines, DriverEventLoop} {
		t.Run(drv.String(), func(t *testing.T) { runFaultInjection(t, streams, size, drv) })
	}
}

func runFaultInjection(t *testing.T, streams, size int, drv Driver) {
	seed := faultSeed(t)
	t.Logf("seed %d (WSMUX_FAULT_SEED=%d reproduces the cut plan)", seed, seed)
	reg := &ResumeRegistry{}
	scfg := DefaultConfig()
	scfg.Resume = true
	scfg.ResumeRegistry = reg
	scfg.Driver = drv
	type result struct {
		seed   int
		sum    [32]byte
		n      int64
		err    error
		server bool
	}
	results := make(chan result, 2*streams)
	serverSession := make(chan *Session, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, scfg)
		if err != nil {
			return // a resume (ErrResumed), or a handshake cut by the proxy
		}
		serverSession <- s
		for {
			st, err := s.AcceptStream(context.Background())
			if err != nil {
				return
			}
			if st.Headers().Get("Kind") == "echo" {
				go func() { _, _ = io.Copy(st, st); _ = st.CloseWrite() }()
				continue
			}
			seed, _ := strconv.Atoi(st.Headers().Get("Seed"))
			go func() {
				_, _ = io.Copy(st, &patternReader{rng: rand.NewChaCha8(faultKey(seed, true)), n: size})
				_ = st.CloseWrite()
			}()
			go func() {
				h := sha256.New()
				n, err := io.Copy(h, st)
				var sum [32]byte
				h.Sum(sum[:0])
				results <- result{seed, sum, n, err, true}
			}()
		}
	}))
	defer srv.Close()
	proxy := newFaultProxy(t, strings.TrimPrefix(srv.URL, "http://"))
	// Gaps between cuts, in bytes of one direction: on these machines
	// they make a cut every 0.2-2 s of transfer, about 30 in all.
	total := 2 * streams * size
	plan := newCutPlan(seed, total/320, total/32, 0)

	ccfg := DefaultConfig()
	ccfg.Resume = true
	ccfg.Driver = drv
	s, err := Dial(context.Background(), "ws://"+proxy.addr()+"/", ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	onLoop := drv == DriverEventLoop && runtime.GOOS == "linux" // TCP: the poller takes it
	if (s.onLoop() != nil) != onLoop {
		t.Fatalf("client on the event loop: %v, want %v", s.onLoop() != nil, onLoop)
	}
	began := time.Now()
	proxy.setPlan(plan) // the first session's handshake is not resumable

	// The interactive stream: a small message, its echo, the next.
	echo, err := s.Open(context.Background(), http.Header{"Kind": {"echo"}})
	if err != nil {
		t.Fatal(err)
	}
	stopEcho := make(chan struct{})
	echoDone := make(chan error, 1)
	var echoes atomic.Int64
	var echoRTT []time.Duration
	go func() {
		msg := make([]byte, 48)
		got := make([]byte, 48)
		for i := 0; ; i++ {
			select {
			case <-stopEcho:
				_ = echo.CloseWrite()
				_, err := echo.Read(got)
				if err != io.EOF {
					echoDone <- fmt.Errorf("echo stream end: %v", err)
					return
				}
				echoDone <- nil
				return
			default:
			}
			copy(msg, fmt.Sprintf("echo %08d %039d", i, i))
			t0 := time.Now()
			if _, err := echo.Write(msg); err != nil {
				echoDone <- fmt.Errorf("echo %d: write: %v", i, err)
				return
			}
			if _, err := io.ReadFull(echo, got); err != nil {
				echoDone <- fmt.Errorf("echo %d: read: %v", i, err)
				return
			}
			echoRTT = append(echoRTT, time.Since(t0))
			if !bytes.Equal(got, msg) {
				echoDone <- fmt.Errorf("echo %d: got %q, want %q", i, got, msg)
				return
			}
			echoes.Add(1)
		}
	}()

	for i := 0; i < streams; i++ {
		st, err := s.Open(context.Background(), http.Header{"Seed": {strconv.Itoa(i)}})
		if err != nil {
			for j, c := range proxy.stopCuts() {
				t.Logf("cut %d at %v: %s, %s (%s); stall %v", j+1, c.at.Round(time.Millisecond), []string{"client->server", "server->client"}[c.dir], cutKindNames[c.kind], c.where, c.stall.Round(time.Microsecond))
			}
			t.Fatalf("Open of stream %d: %v; client stats %+v, session err %v", i, err, s.Stats(), s.Err())
		}
		go func() {
			_, _ = io.Copy(st, &patternReader{rng: rand.NewChaCha8(faultKey(i, false)), n: size})
			_ = st.CloseWrite()
		}()
		go func() {
			h := sha256.New()
			n, err := io.Copy(h, st)
			var sum [32]byte
			h.Sum(sum[:0])
			results <- result{i, sum, n, err, false}
		}()
	}
	mismatches := 0
	for range 2 * streams {
		r := <-results
		want := faultSum(r.seed, !r.server, size)
		if r.err != nil || r.n != int64(size) || r.sum != want {
			mismatches++
			side := "client"
			if r.server {
				side = "server"
			}
			t.Errorf("%s, stream %d: %d bytes, %v, sha256 ok %v", side, r.seed, r.n, r.err, r.sum == want)
		}
	}
	elapsed := time.Since(began)
	cuts := proxy.stopCuts()
	close(stopEcho)
	if err := <-echoDone; err != nil {
		t.Error(err)
	}

	var stalls []time.Duration
	for i, c := range cuts {
		t.Logf("cut %d at %v: %s, %s (%s); stall %v", i+1, c.at.Round(time.Millisecond), []string{"client->server", "server->client"}[c.dir], cutKindNames[c.kind], c.where, c.stall.Round(time.Microsecond))
		if c.stall >= 0 {
			stalls = append(stalls, c.stall)
		}
	}
	slices.Sort(stalls)
	slices.Sort(echoRTT)
	cs := s.Stats()
	ss := <-serverSession
	if (ss.onLoop() != nil) != onLoop {
		t.Fatalf("server on the event loop: %v, want %v", ss.onLoop() != nil, onLoop)
	}
	sst := ss.Stats()
	t.Logf("%d streams x %d MiB each way in %v: %d MiB moved, %d mismatches; %d cuts survived (%d any-byte, %d ws-header, %d mid-message, %d in a resume handshake); client %d suspensions / %d resumes, server %d / %d; stall per cut p50 %v p99 %v max %v; %d echoes, RTT p50 %v p99 %v",
		streams, size>>20, elapsed.Round(time.Millisecond), 2*streams*size>>20, mismatches,
		len(cuts), plan.byKind[cutAnyByte], plan.byKind[cutWSHeader], plan.byKind[cutMessage], plan.byKind[cutHandshake],
		cs.Suspends, cs.Resumes, sst.Suspends, sst.Resumes,
		pct(stalls, 50), pct(stalls, 99), pct(stalls, 100), echoes.Load(), pct(echoRTT, 50), pct(echoRTT, 99))
	if mismatches > 0 {
		t.Fatalf("%d mismatches (seed %d)", mismatches, seed)
	}
	if len(cuts) < 3 {
		t.Fatalf("only %d cuts: the plan's gaps are too large for the transfer", len(cuts))
	}
	if cs.Resumes == 0 || cs.Resumes != cs.Suspends || cs.ResumeFailures != 0 {
		t.Fatalf("client: %d suspensions, %d resumes, %d failures", cs.Suspends, cs.Resumes, cs.ResumeFailures)
	}
	if err := s.Err(); err != nil {
		t.Fatalf("client session: %v", err)
	}
	_ = s.Close()
	<-ss.Done()
	if reg.Len() != 0 || reg.Suspended() != 0 {
		t.Fatalf("registry holds %d sessions, %d suspended, after the end", reg.Len(), reg.Suspended())
	}
}

// faultKey is the key of the pattern stream i sends from the client
// (server false) or the server.
func faultKey(i int, server bool) [32]byte {
	k := [32]byte{byte(i), byte(i >> 8), 'f'}
	if server {
		k[3] = 1
	}
	return k
}

var faultSums sync.Map // [2]int{i, server} -> [32]byte, per size

func faultSum(i int, server bool, size int) [32]byte {
	key := fmt.Sprint(i, server, size)
	if v, ok := faultSums.Load(key); ok {
		return v.([32]byte)
	}
	h := sha256.New()
	_, _ = io.Copy(h, &patternReader{rng: rand.NewChaCha8(faultKey(i, server)), n: size})
	var s [32]byte
	h.Sum(s[:0])
	faultSums.Store(key, s)
	return s
}

// pct returns the p-th percentile of sorted d (nearest rank), 0 if empty.
func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)]
}
