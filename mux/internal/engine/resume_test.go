package engine

import (
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// TestResumeCutAnywhere: two engines move random data on many streams
// (writes, half-closes, resets) while the wire is cut at random messages,
// mid-batch included, and resumed; every stream's bytes arrive exactly
// (no loss, duplication or reordering), half-closes as EOF after the last
// byte, resets as the reset with a prefix of the bytes; neither side ever
// retains more than the peer's session window allows.
func TestResumeCutAnywhere(t *testing.T) {
	total := 0
	for seed := uint64(1); seed <= 40; seed++ {
		// The second half splices DATA into batches, as the fast
		// paths do: retention copies the spliced chunks, which the
		// pump then scribbles over as a client's masking does.
		splice := seed > 20
		t.Run(fmt.Sprintf("%d/splice=%v", seed, splice), func(t *testing.T) {
			cfg := resumeConfig()
			cfg.Splice = splice
			p := newPair(t, seed, cfg, cfg)
			p.run(1500, 60, seed%2 == 0)
			if p.cuts == 0 {
				t.Fatal("no cut")
			}
			if splice != (p.spliced > 0) {
				t.Fatalf("splice %v: %d bytes spliced", splice, p.spliced)
			}
			if !p.a.e.ResumeInEffect() || !p.b.e.ResumeInEffect() {
				t.Fatal("resumption not in effect")
			}
			for _, s := range []*pairSide{p.a, p.b} {
				sus, res := s.e.ResumeCounts()
				if sus != uint64(p.cuts) || res != uint64(p.cuts) {
					t.Fatalf("%s: %d suspends, %d resumes; %d cuts", s.name, sus, res, p.cuts)
				}
			}
			total += p.cuts
		})
	}
	t.Logf("%d cuts survived", total)
}

// TestResumeNoCutSameBytes: without cuts the acknowledged session moves
// the same bytes, and what it retains shrinks to nothing once the peer
// has acknowledged everything.
func TestResumeNoCutSameBytes(t *testing.T) {
	p := newPair(t, 99, resumeConfig(), resumeConfig())
	p.run(2000, 0, true)
	// A last round of RECEIVED: everything is acknowledged.
	for i := 0; i < 3; i++ {
		for _, s := range []*pairSide{p.a, p.b} {
			s.e.rs.ackSent = s.e.rs.recv - ackEvery // force one out
			p.pump(s)
		}
		p.deliver(p.a, 1<<30)
		p.deliver(p.b, 1<<30)
	}
	for _, s := range []*pairSide{p.a, p.b} {
		// At most its last message, a lone RECEIVED nobody answers.
		if r := s.e.RetainedBytes(); r > frame.HeaderSize {
			t.Fatalf("%s retains %d bytes after everything was acknowledged", s.name, r)
		}
	}
	if p.peakR == 0 {
		t.Fatal("nothing was ever retained")
	}
}

// TestResumeNotNegotiated: a peer without RESUME gets exactly today's
// session: no RECEIVED, nothing retained, Suspend refused, and a RECEIVED
// from a peer that did not negotiate it is a PROTOCOL_ERROR.
func TestResumeNotNegotiated(t *testing.T) {
	off := resumeConfig()
	off.Resume = false
	p := newPair(t, 7, resumeConfig(), off)
	p.run(800, 0, false)
	for _, s := range []*pairSide{p.a, p.b} {
		if s.e.ResumeInEffect() || s.e.Resumable() || s.e.RetainedBytes() != 0 {
			t.Fatalf("%s: resumption on against a peer without it", s.name)
		}
		if s.e.Suspend(p.now) {
			t.Fatalf("%s: Suspend accepted", s.name)
		}
	}
	// The server (without RESUME) rejects RECEIVED as an unknown type.
	if err := p.b.e.Feed(frame.AppendReceived(nil, 0), p.now); err == nil || p.b.e.Err().Code != frame.ProtocolError {
		t.Fatalf("RECEIVED without negotiation: %v", err)
	}
}

// TestResumeTimeout: a session not resumed within ResumeTimeout ends as a
// lost connection ends it today: streams fail with the session's error,
// nothing is sent; until then only that timer runs.
func TestResumeTimeout(t *testing.T) {
	p := newPair(t, 3, resumeConfig(), resumeConfig())
	st := p.a.e.Open(nil, 0)
	p.a.streams[st.ID()] = &pairStream{st: st}
	p.a.order = append(p.a.order, st.ID())
	for i := 0; i < 4; i++ {
		p.pump(p.a)
		p.pump(p.b)
		p.deliver(p.a, 10)
		p.deliver(p.b, 10)
	}
	p.now = time.Second
	if !p.a.e.Suspend(p.now) {
		t.Fatal("Suspend refused")
	}
	if d := p.a.e.NextTimer(p.now); d != 30*time.Second {
		t.Fatalf("NextTimer while suspended = %v, want the resume timeout", d)
	}
	// Far past the keepalive timeout: no keepalive failure while
	// suspended.
	p.a.e.Tick(p.now + 29*time.Second)
	if p.a.e.Err() != nil {
		t.Fatalf("ended before the resume timeout: %v", p.a.e.Err())
	}
	if n, _, err := p.a.e.Write(st, []byte("queued while suspended")); n == 0 || err != nil {
		t.Fatalf("Write while suspended: %d, %v", n, err)
	}
	if _, wait, err := p.a.e.Read(st, p.buf, p.now); !wait || err != nil {
		t.Fatalf("Read while suspended: wait %v, %v", wait, err)
	}
	p.a.e.Tick(p.now + 30*time.Second)
	se := p.a.e.Err()
	if se == nil || se.Code != frame.KeepaliveTimeout || !errors.Is(se, ErrResumeTimeout) {
		t.Fatalf("after the resume timeout: %v", se)
	}
	if _, _, err := p.a.e.Read(st, p.buf, p.now); !errors.Is(err, ErrResumeTimeout) {
		t.Fatalf("Read after the resume timeout: %v", err)
	}
	if b := p.a.e.appendBatch(nil, p.now+30*time.Second); len(b) != 0 {
		t.Fatalf("sent %d bytes after the resume timeout", len(b))
	}
	if err := p.a.e.Resume(0, p.now+31*time.Second); err == nil {
		t.Fatal("Resume after the timeout succeeded")
	}
}

// TestResumeBadCount: a peer's count below what it acknowledged, above
// what was sent, or inside a message fails the session with
// PROTOCOL_ERROR instead of replaying the wrong bytes.
func TestResumeBadCount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		count func(sent uint64) uint64
	}{
		{"above-sent", func(sent uint64) uint64 { return sent + 1 }},
		{"mid-message", func(sent uint64) uint64 { return sent - 1 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPair(t, 5, resumeConfig(), resumeConfig())
			p.run(200, 0, false)
			p.pump(p.a)
			p.pump(p.b)
			p.cut()
			err := p.a.e.Resume(tc.count(p.a.e.rs.sent), p.now)
			if !errors.Is(err, ErrResumeCount) || p.a.e.Err() == nil || p.a.e.Err().Code != frame.ProtocolError {
				t.Fatalf("Resume: %v, session %v", err, p.a.e.Err())
			}
		})
	}
}

// TestReceivedWrapsAround: RECEIVED carries the count mod 2^32; the
// receiver resolves it against what it retains, across the 4 GiB mark.
func TestReceivedWrapsAround(t *testing.T) {
	var rs resumeState
	rs.on = true
	base := uint64(1)<<32 - 100
	rs.sent, rs.acked = base, base
	rs.retain(make([]byte, 60), 0, nil)
	rs.retain(make([]byte, 80), 0, nil) // crosses 2^32
	e := &Engine{rs: rs, stats: new(Counters)}
	f := frame.Frame{Header: frame.Header{Type: frame.TypeReceived, Arg: uint32(base + 140)}}
	e.onReceived(&f)
	if e.err != nil || e.rs.acked != base+140 || e.rs.retained != 0 {
		t.Fatalf("acked %d (err %v), retained %d", e.rs.acked, e.err, e.rs.retained)
	}
}

// FuzzResumePair is TestResumeCutAnywhere driven by the fuzzer: the seed
// of the random program, its length, how often the wire is cut, and
// whether streams are reset. Every run checks the same invariants: exact
// bytes on every stream both ways, retained bytes under the bound, both
// sessions alive.
func FuzzResumePair(f *testing.F) {
	f.Add(uint64(1), uint16(400), uint8(20), false)
	f.Add(uint64(2), uint16(900), uint8(3), true)
	f.Add(uint64(3), uint16(300), uint8(1), true)
	f.Fuzz(func(t *testing.T, seed uint64, steps uint16, cutEvery uint8, resets bool) {
		cfg := resumeConfig()
		cfg.Splice = seed&1 == 1 // odd seeds splice DATA, as the fast paths do
		p := newPair(t, seed, cfg, cfg)
		p.run(int(steps%2000), int(cutEvery), resets)
	})
}

// TestResumeCloseWhileSuspended: a graceful Close during a suspension
// waits for the connection: after Resume the replay goes first, then the
// queued data with its FIN, then the GOAWAY; the peer reads every byte and
// the graceful GOAWAY. The counters count the suspension and the resume.
func TestResumeCloseWhileSuspended(t *testing.T) {
	p := newPair(t, 11, resumeConfig(), resumeConfig())
	p.ending = true
	st := p.a.e.Open(nil, 0)
	ps := &pairStream{st: st}
	p.a.streams[st.ID()] = ps
	p.a.order = append(p.a.order, st.ID())
	write := func(s string) {
		n, _, err := p.a.e.Write(st, []byte(s))
		if err != nil || n != len(s) {
			t.Fatalf("Write: %d, %v", n, err)
		}
		ps.sent = append(ps.sent, s...)
	}
	write("before the drop, ")
	p.pump(p.a)
	p.pump(p.b)
	p.deliver(p.b, 10)
	p.deliver(p.a, 10)
	write("lost in the drop, ")
	p.pump(p.a) // laid out, never arrives
	p.cut()
	write("written while suspended")
	p.a.e.CloseWrite(st)
	p.a.e.Shutdown(p.now)
	p.now += 5 * time.Second
	p.a.e.Tick(p.now)
	p.b.e.Tick(p.now)
	if b := p.a.e.appendBatch(nil, p.now); len(b) != 0 {
		t.Fatal("a suspended session sent its close")
	}
	p.resume()
	for i := 0; i < 10; i++ {
		p.pump(p.a)
		p.pump(p.b)
		p.deliver(p.b, 10)
		p.deliver(p.a, 10)
		p.accept(p.b)
		p.read(p.b)
	}
	got := p.b.streams[st.ID()]
	if got == nil || string(got.recv) != string(ps.sent) || got.readEnd != io.EOF {
		t.Fatalf("server read %q (%v), want %q and EOF", got.recv, got.readEnd, ps.sent)
	}
	if !p.b.e.goawayRecv || p.b.e.peerGoAway == nil || p.b.e.peerGoAway.Code != frame.NoError {
		t.Fatalf("server: GOAWAY received %v (%v), want the client's graceful GOAWAY", p.b.e.goawayRecv, p.b.e.peerGoAway)
	}
	if p.a.e.stats.Suspends.Load() != 1 || p.a.e.stats.Resumes.Load() != 1 {
		t.Fatalf("counters: %d suspends, %d resumes", p.a.e.stats.Suspends.Load(), p.a.e.stats.Resumes.Load())
	}
}

// TestResumePingsDoNotPileUp: a connection that drops again and again
// before anything gets through. Each resume used to queue a PING behind
// the replay, so the replays grew by one PING per resume and the peer,
// receiving them all at once, ended the session with ENHANCE_YOUR_CALM
// "PING flood" (FuzzResumePair/regress-resume-pings-pile-up). One PING is
// out at a time across resumes, and its late answer is no RTT sample.
func TestResumePingsDoNotPileUp(t *testing.T) {
	p := newPair(t, 5, resumeConfig(), resumeConfig())
	exchange := func() { // until neither side has anything to send
		for i := 0; p.pump(p.a) || p.pump(p.b) || len(p.aToB)+len(p.bToA) > 0; i++ {
			if i > 1000 {
				t.Fatal("the sessions do not settle")
			}
			p.deliver(p.b, 100)
			p.deliver(p.a, 100)
		}
	}
	exchange()
	suspend := func() {
		p.aToB, p.bToA = nil, nil // lost
		for _, s := range []*pairSide{p.a, p.b} {
			if !s.e.Suspend(p.now) {
				t.Fatalf("%s: Suspend refused", s.name)
			}
		}
	}
	for range 80 {
		suspend()
		p.now += 200 * time.Millisecond // the PING budget refills: 2 a round
		p.resume()
		for range 4 {
			p.pump(p.a)
			p.pump(p.b)
		}
	}
	suspend()
	p.now += time.Second
	p.resume()
	exchange() // fails the test if a Feed fails
	for _, s := range []*pairSide{p.a, p.b} {
		if err := s.e.Err(); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if s.e.pingOut {
			t.Fatalf("%s: a PING is still unanswered", s.name)
		}
		if rtt := s.e.LastRTT(); rtt >= 200*time.Millisecond {
			t.Fatalf("%s: an RTT sample of %v spans a suspension", s.name, rtt)
		}
	}
}
