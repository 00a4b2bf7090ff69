package mux

import (
	"fmt"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

// faultProxy is a TCP proxy between a client and a server for the
// resumption tests. It can refuse new connections (a server that is
// down), send new ones to another target (a server restarted elsewhere),
// cut every connection at once (both ends see a reset), and, with a cut
// plan, cut at byte offsets of its own choosing: it follows each
// direction's HTTP handshake and WebSocket framing, so a planned cut
// lands where the plan says: inside a WebSocket frame header, inside a
// message (a batch of WSMUX frames, so mid-frame too), or at any byte
// (the HTTP handshake of a resume included).
type faultProxy struct {
	t  testing.TB
	ln net.Listener

	mu      sync.Mutex
	target  string
	refuse  bool
	conns   []*proxyConn
	plan    *cutPlan
	start   time.Time
	flowGen int // bumped by every cut; a stall ends at the first WebSocket byte after it
	wg      sync.WaitGroup
}

// proxyConn is one client connection and its upstream.
type proxyConn struct {
	c, u   net.Conn
	dead   bool
	silent bool        // blackholed: bytes are read and dropped, nothing closes
	par    [2]wsParser // 0: client to server, 1: server to client
}

func newFaultProxy(t testing.TB, target string) *faultProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &faultProxy{t: t, ln: ln, target: target, start: time.Now()}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		_ = ln.Close()
		p.cutAll()
		p.wg.Wait()
	})
	return p
}

func (p *faultProxy) addr() string { return p.ln.Addr().String() }

func (p *faultProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		refuse, target := p.refuse, p.target
		p.mu.Unlock()
		if refuse {
			resetConn(c)
			continue
		}
		u, err := net.Dial("tcp", target)
		if err != nil {
			resetConn(c)
			continue
		}
		pc := &proxyConn{c: c, u: u}
		pc.par[0].client, pc.par[1].client = true, false
		p.mu.Lock()
		p.conns = append(p.conns, pc)
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(pc, 0, u, c)
		go p.pipe(pc, 1, c, u)
	}
}

// setRefuse makes the proxy reset new connections (true) or forward them.
func (p *faultProxy) setRefuse(v bool) {
	p.mu.Lock()
	p.refuse = v
	p.mu.Unlock()
}

// setTarget sends new connections to target.
func (p *faultProxy) setTarget(target string) {
	p.mu.Lock()
	p.target = target
	p.mu.Unlock()
}

func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// cutAll resets every connection through the proxy.
func (p *faultProxy) cutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLocked()
}

func (p *faultProxy) cutLocked() {
	for _, pc := range p.conns {
		pc.dead = true
		resetConn(pc.c)
		resetConn(pc.u)
	}
	p.conns = nil
	p.flowGen++
}

// blackhole makes every connection through the proxy silent: bytes are
// read and dropped both ways, and nothing is closed or reset (a path
// that lost its NAT entry). New connections are forwarded.
func (p *faultProxy) blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pc := range p.conns {
		pc.silent = true
	}
}

// pipe forwards src to dst (direction dir of pc), cutting where the plan
// says.
func (p *faultProxy) pipe(pc *proxyConn, dir int, dst, src net.Conn) {
	defer p.wg.Done()
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		for off := 0; off < n; {
			p.mu.Lock()
			if pc.dead {
				p.mu.Unlock()
				return
			}
			if pc.silent {
				p.mu.Unlock()
				break
			}
			k, cut := p.advance(pc, dir, buf[off:n])
			p.mu.Unlock()
			if k > 0 {
				if _, werr := dst.Write(buf[off : off+k]); werr != nil {
					return
				}
			}
			off += k
			if cut {
				p.mu.Lock()
				p.cutLocked()
				p.mu.Unlock()
				return
			}
		}
		if err != nil {
			_ = dst.Close()
			return
		}
	}
}

// Where a planned cut may land.
const (
	cutAnyByte   = iota // at a random byte after the gap (HTTP handshakes included)
	cutWSHeader         // inside the next WebSocket frame header after the gap
	cutMessage          // inside the next message payload after the gap (mid-batch, mid-frame)
	cutHandshake        // inside the next HTTP handshake (a resume's, so at once after a cut)
	cutKinds
)

var cutKindNames = [cutKinds]string{"any-byte", "ws-header", "mid-message", "handshake"}

// cutPlan draws cuts: a direction, a kind, and a gap of bytes in that
// direction after the previous cut's connection resumed.
type cutPlan struct {
	rng     *rand.Rand
	minGap  int
	maxGap  int
	max     int // cuts to make at most (0: no limit)
	dir     int
	kind    int
	gap     int // bytes of dir still to pass before the cut is armed
	hdrAt   int // cutWSHeader: cut after this many header bytes (1..len-1)
	hsAt    int // cutHandshake: cut after this many handshake bytes, or before its last
	armed   bool
	cuts    []cutRecord
	byKind  [cutKinds]int
	stopped bool
}

// cutRecord is one cut made: where, when, and how long bytes stopped.
type cutRecord struct {
	dir, kind int
	where     string
	at        time.Duration
	stall     time.Duration // from the cut to the next WebSocket byte forwarded (-1: none yet)
}

func newCutPlan(seed uint64, minGap, maxGap, maxCuts int) *cutPlan {
	c := &cutPlan{rng: rand.New(rand.NewPCG(seed, seed^0x5851f42d4c957f2d)), minGap: minGap, maxGap: maxGap, max: maxCuts}
	c.next()
	return c
}

func (c *cutPlan) next() {
	c.dir = c.rng.IntN(2)
	c.kind = c.rng.IntN(cutKinds)
	for c.kind == cutHandshake && len(c.cuts) == 0 { // no resume to cut yet
		c.kind = c.rng.IntN(cutKinds)
	}
	c.gap = c.minGap + c.rng.IntN(c.maxGap-c.minGap+1)
	c.hdrAt = 1 + c.rng.IntN(13)
	c.hsAt = 1 + c.rng.IntN(200)
	c.armed = false
	if c.kind == cutHandshake {
		c.gap = 0
	}
}

// setPlan starts cutting by plan c.
func (p *faultProxy) setPlan(c *cutPlan) {
	p.mu.Lock()
	p.plan = c
	p.mu.Unlock()
}

// stopCuts makes no more planned cuts and returns those made.
func (p *faultProxy) stopCuts() []cutRecord {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.plan == nil {
		return nil
	}
	p.plan.stopped = true
	return append([]cutRecord(nil), p.plan.cuts...)
}

// wsParser follows one direction of a connection: the HTTP handshake,
// then WebSocket frames.
type wsParser struct {
	client  bool   // the direction carries masked frames
	inWS    bool   // the handshake is over
	last    uint32 // the handshake's last four bytes
	httpN   int    // bytes of the handshake seen
	hdr     [14]byte
	hdrN    int   // header bytes seen of the frame being read
	hdrLen  int   // its full length, once known (0: not yet)
	payload int64 // payload bytes left of the current frame
}

// advance decides how many bytes of b to forward (p.mu held); cut: then
// cut every connection. It moves pc's parser over them.
func (p *faultProxy) advance(pc *proxyConn, dir int, b []byte) (int, bool) {
	ps := &pc.par[dir]
	plan := p.plan
	active := plan != nil && !plan.stopped && plan.dir == dir && (plan.max == 0 || len(plan.cuts) < plan.max)
	n := 0
	for n < len(b) {
		if active && !plan.armed && plan.gap == 0 {
			plan.armed = true
		}
		if active && plan.armed && plan.kind == cutAnyByte {
			return n, p.recordCut(ps, "")
		}
		if !ps.inWS { // the HTTP handshake, a byte at a time (it is short)
			if active && plan.armed && plan.kind == cutHandshake && ps.httpN > 0 && (ps.httpN == plan.hsAt || ps.last&0xffffff == 0x0d0a0d && b[n] == 0x0a) {
				return n, p.recordCut(ps, fmt.Sprintf("after byte %d of an HTTP handshake", ps.httpN))
			}
			ps.httpN++
			ps.last = ps.last<<8 | uint32(b[n])
			n++
			if active && !plan.armed {
				plan.gap--
			}
			if ps.last == 0x0d0a0d0a {
				ps.inWS = true
			}
			continue
		}
		if ps.payload == 0 { // a frame header
			if ps.hdrN == 1 { // b[n] is byte 1: the header's length is known
				ps.hdrLen = 2
				switch b[n] & 0x7f {
				case 126:
					ps.hdrLen += 2
				case 127:
					ps.hdrLen += 8
				}
				if b[n]&0x80 != 0 {
					ps.hdrLen += 4
				}
			}
			if active && plan.armed && plan.kind == cutWSHeader && ps.hdrN >= 1 && ps.hdrN == min(plan.hdrAt, ps.hdrLen-1) {
				return n, p.recordCut(ps, fmt.Sprintf("after byte %d of a %d-byte header", ps.hdrN, ps.hdrLen))
			}
			ps.hdr[ps.hdrN] = b[n]
			ps.hdrN++
			n++
			if active && !plan.armed {
				plan.gap--
			}
			if ps.hdrN >= 2 && ps.hdrN == ps.hdrLen {
				var l int64
				switch ps.hdr[1] & 0x7f {
				case 126:
					l = int64(ps.hdr[2])<<8 | int64(ps.hdr[3])
				case 127:
					for _, c := range ps.hdr[2:10] {
						l = l<<8 | int64(c)
					}
				default:
					l = int64(ps.hdr[1] & 0x7f)
				}
				ps.payload = l
				ps.hdrN, ps.hdrLen = 0, 0
				p.flowed()
			}
			continue
		}
		// Payload bytes.
		k := int(min(int64(len(b)-n), ps.payload))
		if active && plan.armed && plan.kind == cutMessage {
			if ps.payload >= 2 {
				r := 1 + plan.rng.IntN(int(min(ps.payload-1, 1<<30)))
				if r < k {
					return n + r, p.recordCut(ps, fmt.Sprintf("byte %d of a %d-byte payload", r, ps.payload))
				}
				// The cut point lies past this read: forward what there is
				// and cut at its end (still inside the payload).
				if k < int(ps.payload) {
					ps.payload -= int64(k)
					return n + k, p.recordCut(ps, fmt.Sprintf("%d bytes before the end of a payload", ps.payload))
				}
			}
		}
		if active && !plan.armed {
			k = min(k, plan.gap)
			plan.gap -= k
		}
		ps.payload -= int64(k)
		n += k
		p.flowed()
	}
	return n, false
}

// recordCut counts a cut about to be made (p.mu held) and draws the next.
func (p *faultProxy) recordCut(ps *wsParser, where string) bool {
	plan := p.plan
	if where == "" {
		switch {
		case !ps.inWS:
			where = "inside an HTTP handshake"
		case ps.payload > 0:
			where = "inside a payload"
		case ps.hdrN > 0:
			where = "inside a header"
		default:
			where = "between frames"
		}
	}
	plan.cuts = append(plan.cuts, cutRecord{dir: plan.dir, kind: plan.kind, where: where, at: time.Since(p.start), stall: -1})
	plan.byKind[plan.kind]++
	plan.next()
	return true
}

// flowed records that WebSocket bytes were forwarded (p.mu held): the
// stalls of the cuts before end now.
func (p *faultProxy) flowed() {
	plan := p.plan
	if plan == nil || len(plan.cuts) == 0 {
		return
	}
	last := &plan.cuts[len(plan.cuts)-1]
	if last.stall >= 0 {
		return
	}
	now := time.Since(p.start)
	for i := len(plan.cuts) - 1; i >= 0 && plan.cuts[i].stall < 0; i-- {
		plan.cuts[i].stall = now - plan.cuts[i].at
	}
}
