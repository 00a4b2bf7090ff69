package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// TestResumeRetainedBound: a peer that negotiates resumption and returns
// credit but never acknowledges (sends no RECEIVED) would make the sender
// retain everything it ever sent. The sender ends the session with
// ENHANCE_YOUR_CALM once its retained bytes pass RetainedLimit, at most
// one batch past it; a peer that acknowledges never gets there (the other
// resume tests check the tighter bound of the spec on every batch).
func TestResumeRetainedBound(t *testing.T) {
	p := newPair(t, 11, resumeConfig(), resumeConfig())
	p.bound = 1 << 40 // this test checks the engine's own limit
	st := p.a.e.Open(nil, 0)
	p.a.streams[st.ID()] = &pairStream{st: st}
	p.a.order = append(p.a.order, st.ID())
	// The SETTINGS exchange: both set RESUME.
	for range 3 {
		p.pump(p.a)
		p.pump(p.b)
		p.deliver(p.b, 10)
		p.deliver(p.a, 10)
	}
	if !p.a.e.ResumeInEffect() || !p.b.e.ResumeInEffect() {
		t.Fatal("resumption not negotiated")
	}
	// From now on the server never acknowledges, yet returns credit.
	p.b.e.rs.inEffect = false
	limit := p.a.e.RetainedLimit()
	chunk := make([]byte, 32<<10)
	peak := 0
	for i := 0; p.a.e.Err() == nil; i++ {
		if i > 100000 {
			t.Fatalf("no end after %d rounds; retained %d, limit %d", i, p.a.e.RetainedBytes(), limit)
		}
		if _, _, err := p.a.e.Write(st, chunk); err != nil && p.a.e.Err() == nil {
			t.Fatalf("Write: %v", err)
		}
		p.pump(p.a)
		peak = max(peak, p.a.e.RetainedBytes())
		p.deliver(p.b, 10)
		p.read(p.b)
		p.pump(p.b)
		p.deliver(p.a, 10)
	}
	se := p.a.e.Err()
	if se.Code != frame.EnhanceYourCalm || !errors.Is(se, ErrRetainedOverBound) {
		t.Fatalf("session ended with %v, want ENHANCE_YOUR_CALM (retained over the bound)", se)
	}
	if peak <= limit || peak > limit+resumeConfig().MaxBatch {
		t.Fatalf("peak retained %d, limit %d: want just past it", peak, limit)
	}
	t.Logf("limit %d bytes, peak %d", limit, peak)
}

// TestResumeKeepaliveSuspends: with resumption in effect, nothing
// received for the keepalive timeout means the connection is dead, not the
// session: the engine reports it once (TakeConnLost) instead of failing,
// and after a resume the keepalive clock starts again from the resume.
// Without resumption the same timeout fails the session.
func TestResumeKeepaliveSuspends(t *testing.T) {
	p := newPair(t, 13, resumeConfig(), resumeConfig())
	for range 3 {
		p.pump(p.a)
		p.pump(p.b)
		p.deliver(p.b, 10)
		p.deliver(p.a, 10)
	}
	ka := resumeConfig().KeepAliveTimeout
	p.now += ka
	p.a.e.Tick(p.now)
	if err := p.a.e.Err(); err != nil {
		t.Fatalf("keepalive timeout failed a resumable session: %v", err)
	}
	taken := func(e *Engine) bool { lost, _ := e.TakeConnLost(); return lost }
	if lost, err := p.a.e.TakeConnLost(); !lost || err == nil || taken(p.a.e) {
		t.Fatalf("TakeConnLost: want true once, with the timeout's error (%v)", err)
	}
	p.cut()
	p.now += time.Second
	p.resume()
	p.a.e.Tick(p.now + ka/2)
	if taken(p.a.e) || p.a.e.Err() != nil {
		t.Fatalf("the keepalive timeout fired again right after the resume: %v", p.a.e.Err())
	}

	cfg := resumeConfig()
	cfg.Resume = false
	q := newPair(t, 13, cfg, cfg)
	for range 3 {
		q.pump(q.a)
		q.pump(q.b)
		q.deliver(q.b, 10)
		q.deliver(q.a, 10)
	}
	q.now += ka
	q.a.e.Tick(q.now)
	if se := q.a.e.Err(); se == nil || se.Code != frame.KeepaliveTimeout || taken(q.a.e) {
		t.Fatalf("without resumption: %v", se)
	}
}
