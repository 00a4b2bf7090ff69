package ops

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/wsmux/wsmux/mux"
)

func TestLimiterSessionsAndDials(t *testing.T) {
	m := NewMetrics()
	l := NewLimiter(Limits{SessionsPerCaller: 2, DialsPerSecond: 2, DialBurst: 2}, m)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }

	r1, err := l.AcquireSession("a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AcquireSession("a"); err != nil {
		t.Fatal(err)
	}
	_, err = l.AcquireSession("a")
	var le *LimitError
	if !errors.As(err, &le) || le.Limit != LimitSessions {
		t.Fatalf("third session of a: %v", err)
	}
	if _, err := l.AcquireSession("b"); err != nil {
		t.Fatalf("b is limited by a's sessions: %v", err)
	}
	r1()
	r1() // idempotent
	if _, err := l.AcquireSession("a"); err != nil {
		t.Fatalf("a after releasing one: %v", err)
	}

	for range 2 {
		if err := l.AllowDial("c"); err != nil {
			t.Fatal(err)
		}
	}
	err = l.AllowDial("c")
	if !errors.As(err, &le) || le.Limit != LimitDials || le.RetryAfter != 500*time.Millisecond {
		t.Fatalf("third dial of c: %v (%+v)", err, le)
	}
	rec := httptest.NewRecorder()
	le.Reject(rec)
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("reject: %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	now = now.Add(500 * time.Millisecond) // one token back
	if err := l.AllowDial("c"); err != nil {
		t.Fatalf("after the refill: %v", err)
	}
	if err := l.AllowDial("c"); err == nil {
		t.Fatal("a second dial with one token back")
	}
	if got := Value(l.refusals.WithLabelValues(LimitSessions)); got != 1 {
		t.Errorf("session refusals %v", got)
	}
	if got := Value(l.refusals.WithLabelValues(LimitDials)); got != 2 {
		t.Errorf("dial refusals %v", got)
	}
}

func TestApplyBuffer(t *testing.T) {
	for _, buf := range []int64{1 << 20, 8 << 20, 64 << 20, 1 << 30} {
		l := NewLimiter(Limits{SessionsPerCaller: 4, StreamsPerSession: 50, BufferPerCaller: buf}, nil)
		var cfg mux.Config
		l.ApplyBuffer(&cfg)
		if err := cfg.Validate(); err != nil {
			t.Fatalf("buffer %d: %v", buf, err)
		}
		if cfg.MaxStreams != 50 {
			t.Fatalf("MaxStreams %d", cfg.MaxStreams)
		}
		per := int64(cfg.MaxSessionWindow + cfg.SessionSendBuffer)
		if floor := int64(192 << 10); per > max(buf/4, floor) {
			t.Errorf("buffer %d over 4 sessions: a session may buffer %d", buf, per)
		}
		if cfg.MaxStreamWindow > cfg.MaxSessionWindow {
			t.Errorf("stream window %d over session window %d", cfg.MaxStreamWindow, cfg.MaxSessionWindow)
		}
	}
}
