package engine

import (
	"bytes"
	"errors"
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
		b = s.e.appendPreface(b, p.now)
		s.preface = true
	}
	b = s.e.appendBatch(b, p.now)
	if r := s.e.RetainedBytes(); r > p.bound {
		p.t.Fatalf("%s retains %d bytes, more than the bound %d", s.name, r, p.bound)
	} else if r > p.peakR {
		p.peakR = r
	}
	if len(b) == 0 {
		return false
	}
	msg := append([]byte(nil), b...)
	if segs, n := s.e.spliced(); n > 0 {
		msg = s.e.splice.flatten(b)
		p.spliced += n
		for _, sg := range segs {
			for i := range sg.Data {
				sg.Data[i] ^= 0xa5 // a client masks them in place
			}
		}
	}
	s.e.releaseSpliced()
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
	// The cuts start once both SETTINGS arrived: only then is resumption
	// in effect, and a connection lost earlier ends the session instead
	// (TestSuspendOnlyOnceInEffect).
	p.pump(p.a)
	p.pump(p.b)
	p.deliver(p.b, 1<<30)
	p.deliver(p.a, 1<<30)
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
