package mux

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testkit/leakcheck"
	"github.com/wsmux/wsmux/internal/testnet"
)

// burstCycles is how many connect-and-drop cycles the burst test runs.
const burstCycles = 2000

// TestResumeBurstOfDrops: a server with resumption on (the default 30 s
// resume timeout) takes a burst of 2,000 connect-and-drop cycles: each
// client upgrades, gets its 101 and resume token, and drops before its
// SETTINGS set RESUME (at once, with a reset, halfway through its
// SETTINGS, or after SETTINGS without RESUME). Within a few seconds every
// session has ended and left its registry, its goroutines are gone and the
// heap is back at its baseline: none of those sessions is kept for the
// resume timeout.
func TestResumeBurstOfDrops(t *testing.T) {
	reg := &ResumeRegistry{}
	cfg := DefaultConfig()
	cfg.Resume = true
	cfg.ResumeRegistry = reg
	var live testnet.Gauge // sessions not yet Done
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		live.Add(1) // before the 101: a client that has it is counted
		s, err := Upgrade(w, r, cfg)
		if err != nil {
			live.Add(-1)
			return
		}
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
	d := testnet.NewDropper(t, "ws://"+strings.TrimPrefix(srv.URL, "http://")+"/", nil, HeaderResumeToken)
	// ended waits for every session to be Done, then checks that none is
	// left in the registry (a session leaves it before Done).
	ended := func(within time.Duration) {
		t.Helper()
		if !live.WaitZero(within) {
			t.Fatalf("%d sessions still live %v after the burst (%d tokens, %d suspended)", live.Len(), within, reg.Len(), reg.Suspended())
		}
		if n, sus := reg.Len(), reg.Suspended(); n != 0 || sus != 0 {
			t.Fatalf("every session ended, but the registry holds %d tokens, %d suspended", n, sus)
		}
	}

	// A warm-up, so that the baseline has the pools, the event loop's
	// workers and the listener's goroutines a first burst starts.
	if err := d.Burst(100, 16); err != nil {
		t.Fatal(err)
	}
	ended(10 * time.Second)
	baseline := leakcheck.IgnoreCurrent()
	baseHeap := heapInuse()

	start := time.Now()
	if err := d.Burst(burstCycles, 16); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	peak := live.Len()
	ended(5 * time.Second)
	settledIn := time.Since(start) - took
	leakcheck.VerifyNone(t, baseline)
	heap := heapInuse()
	t.Logf("%d connect-and-drop cycles in %v, %d sessions live right after; %v later none, heap in use %.1f MiB (baseline %.1f MiB)",
		burstCycles, took.Round(time.Millisecond), peak, settledIn.Round(time.Millisecond),
		float64(heap)/(1<<20), float64(baseHeap)/(1<<20))
	if heap > baseHeap+baseHeap/4+(1<<20) {
		t.Errorf("heap in use %d bytes after the burst, baseline %d", heap, baseHeap)
	}
	if st := reg.Evicted(); st != 0 {
		t.Errorf("%d suspended sessions evicted: sessions were suspended", st)
	}
}
