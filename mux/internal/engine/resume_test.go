package engine

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
)

// The resumption tests drive two engines against each other with a fake
// clock: batches laid out by one are fed to the other over a "wire" of
// whole messages that a cut truncates at a random message (everything
// after it, the message being written included, is lost).

const resetCode = frame.ErrorCode(0x1234) // an application code: the harness's resets

// resumeConfig has small windows that do not grow, so that the bound on
// retained bytes is tight enough to mean something.
func resumeConfig() Config {
	cfg := testConfig()
	cfg.Resume = true
	cfg.ResumeTimeout = 30 * time.Second
	cfg.InitialStreamWindow = 64 << 10
	cfg.MaxStreamWindow = 64 << 10
	cfg.InitialSessionWindow = 256 << 10
	cfg.MaxSessionWindow = 256 << 10
	cfg.StreamSendBuffer = 64 << 10
	cfg.SessionSendBuffer = 512 << 10
	cfg.MaxBatch = 64 << 10
	return cfg
}

type pairStream struct {
	st       *Stream
	sent     []byte // what this side's application wrote and the engine took
	recv     []byte // what this side's application read
	closedW  bool   // CloseWrite called
	resetBy  bool   // this side reset it
	readEnd  error  // how Read ended (io.EOF, a *StreamError...)
	expected bool   // ended with its peer's record checked
}

type pairSide struct {
	name    string
	e       *Engine
	preface bool // our SETTINGS went out
	streams map[uint32]*pairStream
	order   []uint32
}

type pair struct {
	t     *testing.T
	rng   *rand.Rand
	now   time.Duration
	a, b  *pairSide
	aToB  [][]byte // messages in flight
	bToA  [][]byte
	buf   []byte
	bound int // largest retained bytes allowed
	cuts  int
	peakR int
	// spliced: DATA bytes the batches handed over from send chunks
	// (Config.Splice) rather than copying them.
	spliced int
	// ending: the test closes a session, so Feed returning its end is
	// expected.
	ending bool
}

func newPair(t *testing.T, seed uint64, cfgA, cfgB Config) *pair {
	p := &pair{t: t, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), buf: make([]byte, 40<<10)}
	p.a = &pairSide{name: "client", e: New(cfgA, true, nil, 0), streams: map[uint32]*pairStream{}}
	p.b = &pairSide{name: "server", e: New(cfgB, false, nil, 0), streams: map[uint32]*pairStream{}}
	// Retained bytes: DATA the peer has not given credit back for (its
	// session window), the 64 KiB of other bytes it may leave
	// unacknowledged, two batches in flight, and frame headers.
	w := max(cfgA.MaxSessionWindow, cfgB.MaxSessionWindow)
	p.bound = w + ackEvery + 2*max(cfgA.MaxBatch, cfgB.MaxBatch) + w/64
	return p
}

// pump lays out one batch of s onto its wire; it reports whether there was
// one.
func (p *pair) pump(s *pairSide) bool {
	var b []byte
	if !s.preface {
		b = s.e.AppendPreface(b, p.now)
		s.preface = true
	}
	b = s.e.AppendBatch(b, p.now)
	if r := s.e.RetainedBytes(); r > p.bound {
		p.t.Fatalf("%s retains %d bytes, more than the bound %d", s.name, r, p.bound)
	} else if r > p.peakR {
		p.peakR = r
	}
	if len(b) == 0 {
		return false
	}
	msg := append([]byte(nil), b...)
	if segs, n := s.e.Spliced(); n > 0 {
		msg = s.e.splice.flatten(b)
		p.spliced += n
		for _, sg := range segs {
			for i := range sg.Data {
				sg.Data[i] ^= 0xa5 // a client masks them in place
			}
		}
	}
	s.e.ReleaseSpliced()
	if s == p.a {
		p.aToB = append(p.aToB, msg)
	} else {
		p.bToA = append(p.bToA, msg)
	}
	return true
}

// deliver feeds up to n messages of the wire into s.
func (p *pair) deliver(s *pairSide, n int) bool {
	w := &p.aToB
	if s == p.a {
		w = &p.bToA
	}
	moved := false
	for n > 0 && len(*w) > 0 {
		msg := (*w)[0]
		*w = (*w)[1:]
		if err := s.e.Feed(msg, p.now); err != nil && !p.ending {
			p.t.Fatalf("%s: Feed: %v", s.name, err)
		}
		p.accept(s)
		n--
		moved = true
	}
	return moved
}

func (p *pair) accept(s *pairSide) {
	for st := s.e.Accept(); st != nil; st = s.e.Accept() {
		s.streams[st.ID()] = &pairStream{st: st}
		s.order = append(s.order, st.ID())
	}
}

// read reads what is buffered on every stream of s.
func (p *pair) read(s *pairSide) {
	for _, id := range s.order {
		ps := s.streams[id]
		for ps.readEnd == nil {
			n, wait, err := s.e.Read(ps.st, p.buf, p.now)
			ps.recv = append(ps.recv, p.buf[:n]...)
			if err != nil {
				ps.readEnd = err
			}
			if wait || n == 0 {
				break
			}
		}
	}
}

// appOps does a few random things an application would on s.
func (p *pair) appOps(s *pairSide, reset bool) {
	r := p.rng
	if ok, _ := s.e.OpenState(); ok && len(s.order) < 12 && r.IntN(8) == 0 {
		st := s.e.Open(nil, p.now)
		s.streams[st.ID()] = &pairStream{st: st}
		s.order = append(s.order, st.ID())
	}
	if len(s.order) == 0 {
		return
	}
	ps := s.streams[s.order[r.IntN(len(s.order))]]
	switch k := r.IntN(100); {
	case k < 70:
		if ps.closedW || ps.resetBy || ps.st.resetErr != nil {
			return
		}
		data := make([]byte, 1+r.IntN(30<<10))
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		n, _, err := s.e.Write(ps.st, data)
		if err != nil {
			return
		}
		ps.sent = append(ps.sent, data[:n]...)
	case k < 75:
		if !ps.closedW && !ps.resetBy {
			s.e.CloseWrite(ps.st)
			ps.closedW = true
		}
	case k < 77 && reset:
		if !ps.closedW && !ps.resetBy && ps.st.resetErr == nil && ps.readEnd == nil {
			s.e.Reset(ps.st, resetCode, p.now)
			ps.resetBy = true
		}
	default:
		p.read(s)
	}
}

// cut drops the connection: each wire delivers a random prefix of what is
// in flight, the rest is lost, and both sides suspend.
func (p *pair) cut() {
	p.cuts++
	p.deliver(p.b, p.rng.IntN(len(p.aToB)+1))
	p.deliver(p.a, p.rng.IntN(len(p.bToA)+1))
	p.aToB, p.bToA = nil, nil
	for _, s := range []*pairSide{p.a, p.b} {
		if !s.e.Suspend(p.now) {
			p.t.Fatalf("%s: Suspend refused", s.name)
		}
	}
}

// resume reconnects: each side learns the other's received count.
func (p *pair) resume() {
	ra, rb := p.a.e.ReceivedCount(), p.b.e.ReceivedCount()
	if err := p.a.e.Resume(rb, p.now); err != nil {
		p.t.Fatalf("client: Resume(%d): %v", rb, err)
	}
	if err := p.b.e.Resume(ra, p.now); err != nil {
		p.t.Fatalf("server: Resume(%d): %v", ra, err)
	}
}

func (p *pair) tick() {
	p.now += time.Duration(1+p.rng.IntN(20)) * time.Millisecond
	p.a.e.Tick(p.now)
	p.b.e.Tick(p.now)
	for _, s := range []*pairSide{p.a, p.b} {
		if err := s.e.Err(); err != nil {
			p.t.Fatalf("%s: session ended: %v", s.name, err)
		}
	}
}

// run plays steps random steps with a cut now and then (cutEvery: the
// mean steps between cuts; 0: none), then ends every stream and drains.
func (p *pair) run(steps, cutEvery int, resets bool) {
	r := p.rng
	for i := 0; i < steps; i++ {
		switch k := r.IntN(10); {
		case k < 3:
			p.appOps(p.a, resets)
			p.appOps(p.b, resets)
		case k < 6:
			p.pump(p.a)
			p.pump(p.b)
		case k < 9:
			p.deliver(p.b, 1+r.IntN(3))
			p.deliver(p.a, 1+r.IntN(3))
		default:
			p.tick()
		}
		if cutEvery > 0 && r.IntN(cutEvery) == 0 {
			// Sometimes the side that lays out a batch loses it
			// mid-write: it was laid out (retained) but never arrives.
			if r.IntN(2) == 0 {
				p.pump(p.a)
				p.pump(p.b)
			}
			p.cut()
			// While suspended: the applications go on, the clock runs.
			for j := r.IntN(5); j > 0; j-- {
				p.appOps(p.a, false)
				p.appOps(p.b, false)
				p.pump(p.a) // lays out nothing
				p.pump(p.b)
				p.now += time.Duration(r.IntN(3000)) * time.Millisecond
				p.a.e.Tick(p.now)
				p.b.e.Tick(p.now)
			}
			if len(p.aToB)+len(p.bToA) > 0 {
				p.t.Fatal("a suspended session sent something")
			}
			p.resume()
		}
	}
	// The end: every stream half-closed both ways (those accepted
	// meanwhile too), then drained.
	for idle := 0; idle < 3; {
		p.accept(p.a)
		p.accept(p.b)
		for _, s := range []*pairSide{p.a, p.b} {
			for _, id := range s.order {
				ps := s.streams[id]
				if !ps.closedW && !ps.resetBy {
					s.e.CloseWrite(ps.st)
					ps.closedW = true
				}
			}
		}
		p.read(p.a)
		p.read(p.b)
		moved := p.pump(p.a)
		moved = p.pump(p.b) || moved
		moved = p.deliver(p.b, 1<<30) || moved
		moved = p.deliver(p.a, 1<<30) || moved
		p.tick()
		if moved {
			idle = 0
		} else {
			idle++
		}
	}
	p.check()
}

// check compares every stream's bytes both ways.
func (p *pair) check() {
	t := p.t
	for _, dir := range [][2]*pairSide{{p.a, p.b}, {p.b, p.a}} {
		from, to := dir[0], dir[1]
		for _, id := range from.order {
			src := from.streams[id]
			dst := to.streams[id]
			if dst == nil {
				if len(src.sent) > 0 && !src.resetBy {
					t.Fatalf("%s stream %d: never reached %s", from.name, id, to.name)
				}
				continue
			}
			reset := src.resetBy || dst.resetBy
			switch {
			case !reset:
				if !bytes.Equal(src.sent, dst.recv) {
					t.Fatalf("stream %d %s->%s: %d bytes sent, %d received, equal prefix %d",
						id, from.name, to.name, len(src.sent), len(dst.recv), commonPrefix(src.sent, dst.recv))
				}
				if dst.readEnd != io.EOF {
					t.Fatalf("stream %d %s->%s: Read ended with %v, want EOF", id, from.name, to.name, dst.readEnd)
				}
			default:
				if !bytes.HasPrefix(src.sent, dst.recv) {
					t.Fatalf("stream %d %s->%s (reset): received bytes are not a prefix of those sent", id, from.name, to.name)
				}
			}
			if src.resetBy && !dst.resetBy {
				var se *StreamError
				if !errors.As(dst.readEnd, &se) || se.Code != resetCode || !se.Remote {
					if dst.readEnd != io.EOF || !bytes.Equal(src.sent, dst.recv) {
						t.Fatalf("stream %d: %s reset it, %s's Read ended with %v", id, from.name, to.name, dst.readEnd)
					}
				}
			}
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

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
	if b := p.a.e.AppendBatch(nil, p.now+30*time.Second); len(b) != 0 {
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
	if b := p.a.e.AppendBatch(nil, p.now); len(b) != 0 {
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
