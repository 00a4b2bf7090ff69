package mux

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/wshandshake"
)

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

// connectAndDrop upgrades to url (headers h), checks the 101 carries a
// resume token and drops the connection as k says.
func connectAndDrop(url string, h http.Header, k dropKind, settings, plain []byte) error {
	conn, _, hdr, err := wshandshake.Dial(context.Background(), url, wshandshake.DialOptions{Header: h})
	if err != nil {
		return err
	}
	defer conn.Close()
	if hdr.Get(HeaderResumeToken) == "" {
		return fmt.Errorf("no resume token in the 101")
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

// connectAndDropBurst runs n connect-and-drop cycles against url, workers
// at a time, the kinds of drop in turn; it reports the first error.
func connectAndDropBurst(t testing.TB, url string, h http.Header, n, workers int) error {
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
				if err := connectAndDrop(url, h, k, settings, plain); err != nil {
					once.Do(func() { first = fmt.Errorf("cycle %d (%v): %w", i, k, err) })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}

// footprint is what a server holds: sessions, goroutines, heap in use.
type footprint struct {
	sessions, tokens, suspended int
	goroutines                  int
	heap                        uint64
}

func (f footprint) String() string {
	return fmt.Sprintf("%d sessions (%d tokens, %d suspended), %d goroutines, heap in use %.1f MiB",
		f.sessions, f.tokens, f.suspended, f.goroutines, float64(f.heap)/(1<<20))
}

// settled waits up to within for cond to hold on the figures measure
// returns, and returns the last figures and whether it held. Polling is
// the point here: what is observed is that nothing is left.
func settled(within time.Duration, measure func() footprint, cond func(footprint) bool) (footprint, time.Duration, bool) {
	start := time.Now()
	for {
		f := measure()
		if cond(f) {
			return f, time.Since(start), true
		}
		if time.Since(start) > within {
			return f, time.Since(start), false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// burstCycles is how many connect-and-drop cycles the burst tests run.
const burstCycles = 2000

// TestResumeBurstOfDrops: a server with resumption on (the default 30 s
// resume timeout) takes a burst of 2,000 connect-and-drop cycles: each
// client upgrades, gets its 101 and resume token, and drops before its
// SETTINGS set RESUME (at once, with a reset, halfway through its
// SETTINGS, or after SETTINGS without RESUME). Within a few seconds its
// sessions, goroutines and heap are back at their baseline: none of those
// sessions is kept for the resume timeout.
func TestResumeBurstOfDrops(t *testing.T) {
	reg := &ResumeRegistry{}
	cfg := DefaultConfig()
	cfg.Resume = true
	cfg.ResumeRegistry = reg
	var live atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, err := Upgrade(w, r, cfg)
		if err != nil {
			return
		}
		live.Add(1)
		go func() { // the application: accepts streams until the end
			for {
				if _, err := s.AcceptStream(context.Background()); err != nil {
					break
				}
			}
			<-s.Done()
			live.Add(-1)
		}()
	}))
	defer srv.Close()
	url := "ws://" + strings.TrimPrefix(srv.URL, "http://") + "/"
	measure := func() footprint {
		return footprint{sessions: int(live.Load()), tokens: reg.Len(), suspended: reg.Suspended(),
			goroutines: runtime.NumGoroutine(), heap: heapInuse()}
	}
	idle := func(f footprint) bool { return f.sessions == 0 && f.tokens == 0 && f.suspended == 0 }

	// A warm-up, so that the baseline has the pools, the event loop's
	// workers and the listener's goroutines a first burst starts.
	if err := connectAndDropBurst(t, url, nil, 100, 16); err != nil {
		t.Fatal(err)
	}
	base, _, ok := settled(10*time.Second, measure, idle)
	if !ok {
		t.Fatalf("after the warm-up: %v", base)
	}
	t.Logf("baseline: %v", base)

	start := time.Now()
	if err := connectAndDropBurst(t, url, nil, burstCycles, 16); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	peak := measure()
	const within = 5 * time.Second
	after, waited, ok := settled(within, measure, func(f footprint) bool {
		return idle(f) && f.goroutines <= base.goroutines+2 && f.heap <= base.heap+base.heap/4+(1<<20)
	})
	t.Logf("%d connect-and-drop cycles in %v; right after: %v", burstCycles, took.Round(time.Millisecond), peak)
	t.Logf("%v later: %v", waited.Round(time.Millisecond), after)
	if !ok {
		t.Fatalf("not back at the baseline %v after %v: %v (right after the burst: %v)", base, within, after, peak)
	}
	if st := reg.Evicted(); st != 0 {
		t.Errorf("%d suspended sessions evicted: sessions were suspended", st)
	}
}
