package bench

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// A link emulator in user space, for the WAN workloads (tc netem needs
// privileges these machines do not give): a relay between two connections
// that holds every byte for a one-way delay, lets bytes leave no faster than
// a bandwidth cap, and can stop delivering for a while at a fixed period, as
// a link does while TCP recovers a loss.

// LinkConfig describes one emulated link; the same in both directions.
type LinkConfig struct {
	// Delay is the one-way delay: a byte that leaves at t arrives at t+Delay.
	// The round-trip time is twice Delay.
	Delay time.Duration
	// Rate caps the link in bytes per second, shared by every connection of
	// one Link and direction (the two directions are independent, as on a
	// full-duplex link); 0 means no cap.
	Rate int64
	// StallEvery, when positive, stops the link for StallFor at the start of
	// every period of StallEvery after the first (measured from NewLink):
	// nothing leaves during a stall, the bytes queue. StallFor must be below
	// StallEvery.
	StallEvery, StallFor time.Duration
	// Queue is what one connection may hold per direction beyond the
	// bandwidth-delay product (Rate x Delay): the router's queue. When it is
	// full the relay stops reading, so the sender's TCP backs off. 0 means
	// DefaultLinkQueue.
	Queue int
}

// DefaultLinkQueue is LinkConfig.Queue when zero.
const DefaultLinkQueue = 1 << 20

// linkReadSize bounds one read of the relay, so no single packet is held
// for long at the cap (64 KiB takes 0.5 ms at 1 Gbit/s).
const linkReadSize = 64 << 10

// maxLinkBuffer bounds what a LinkConfig may ask each connection to hold.
const maxLinkBuffer = 256 << 20

// Validate reports a configuration the emulator cannot run.
func (c LinkConfig) Validate() error {
	switch {
	case c.Delay < 0 || c.Rate < 0 || c.Queue < 0 || c.StallEvery < 0 || c.StallFor < 0:
		return errors.New("bench: link: negative Delay, Rate, Queue or stall")
	case c.StallEvery > 0 && c.StallFor >= c.StallEvery:
		return errors.New("bench: link: StallFor must be below StallEvery")
	case c.buffer() > maxLinkBuffer:
		return fmt.Errorf("bench: link: %d bytes per connection and direction, above %d: lower Rate x Delay or Queue", c.buffer(), maxLinkBuffer)
	}
	return nil
}

// bdp is the bandwidth-delay product of one direction.
func (c LinkConfig) bdp() int64 {
	if c.Rate == 0 {
		return 0
	}
	return c.Rate * int64(c.Delay) / int64(time.Second)
}

// buffer is what one connection holds per direction at most.
func (c LinkConfig) buffer() int64 {
	q := int64(c.Queue)
	if q == 0 {
		q = DefaultLinkQueue
	}
	return c.bdp() + q
}

// String names the link in workload variants: "rtt=80ms_1000Mbps" (no
// comma, which separates --workloads, nor slash, which separates
// sub-benchmarks).
func (c LinkConfig) String() string {
	s := "rtt=" + (2 * c.Delay).String()
	if c.Rate > 0 {
		s += fmt.Sprintf("_%dMbps", c.Rate*8/1e6)
	}
	if c.StallEvery > 0 {
		s += fmt.Sprintf("_stall=%v-every-%v", c.StallFor, c.StallEvery)
	}
	return s
}

// Link is one emulated link between two hosts. Every connection relayed
// through it shares its bandwidth cap per direction.
type Link struct {
	cfg   LinkConfig
	start time.Time
	dirs  [2]linkClock // a to b, b to a
}

// linkClock is the departure schedule of one direction of a Link.
type linkClock struct {
	mu      sync.Mutex
	lastDep time.Time
}

// NewLink returns a link with cfg (see Validate).
func NewLink(cfg LinkConfig) (*Link, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Link{cfg: cfg, start: time.Now()}, nil
}

// Config returns the link's configuration.
func (l *Link) Config() LinkConfig { return l.cfg }

// departure schedules n bytes read from the sender at now on direction d
// and returns when they arrive at the far end.
func (l *Link) departure(d int, now time.Time, n int) time.Time {
	c := &l.dirs[d]
	c.mu.Lock()
	defer c.mu.Unlock()
	dep := now
	if c.lastDep.After(dep) {
		dep = c.lastDep
	}
	if l.cfg.Rate > 0 {
		dep = dep.Add(time.Duration(int64(n) * int64(time.Second) / l.cfg.Rate))
	}
	if e := l.cfg.StallEvery; e > 0 {
		since := dep.Sub(l.start)
		if phase := since % e; since >= e && phase < l.cfg.StallFor {
			dep = dep.Add(l.cfg.StallFor - phase)
		}
	}
	c.lastDep = dep
	return dep.Add(l.cfg.Delay)
}

// Connect relays a and b through the link, each direction in two goroutines
// of its own, until both directions have ended: a read end of file is
// delivered (after the delay) as CloseWrite on the other side where it has
// one, as Close where not; a failed read or write closes both connections.
// It returns at once; wait returns once every goroutine has. Closing either
// connection ends the relay within the delay.
//
// Each direction holds at most Rate x Delay + Queue bytes, in a buffer
// allocated here, so a heap measured after Connect does not count it.
func (l *Link) Connect(a, b net.Conn) (wait func()) {
	var wg sync.WaitGroup
	var once sync.Once
	fail := func() {
		once.Do(func() {
			a.Close()
			b.Close()
		})
	}
	for d, p := range [2][2]net.Conn{{a, b}, {b, a}} {
		r := newLinkDir(l, d, p[0], p[1], fail)
		wg.Add(2)
		go func() { defer wg.Done(); r.readLoop() }()
		go func() { defer wg.Done(); r.writeLoop() }()
	}
	return wg.Wait
}

// linkPacket is one read of the relay: buf[off:off+n], due at the far end
// at at; eof marks the sender's end (err: how it ended).
type linkPacket struct {
	off, n int
	at     time.Time
	eof    bool
	err    error
}

// linkDir is one direction of one connection: a reader filling a ring
// buffer and a writer emptying it in order, each packet at its time.
type linkDir struct {
	l        *Link
	d        int
	src, dst net.Conn
	fail     func()

	buf   []byte
	mu    sync.Mutex
	tail  int // where the next read goes
	used  int // bytes read and not yet delivered
	space chan struct{}
	pkts  chan linkPacket
	dead  chan struct{} // the writer has stopped
}

// linkMaxPackets bounds the packets queued per direction; small reads (an
// echo of 64 bytes) queue many packets in few bytes.
const linkMaxPackets = 4096

func newLinkDir(l *Link, d int, src, dst net.Conn, fail func()) *linkDir {
	return &linkDir{
		l: l, d: d, src: src, dst: dst, fail: fail,
		buf:   make([]byte, l.cfg.buffer()),
		space: make(chan struct{}, 1),
		pkts:  make(chan linkPacket, linkMaxPackets),
		dead:  make(chan struct{}),
	}
}

func (r *linkDir) readLoop() {
	for {
		r.mu.Lock()
		free := len(r.buf) - r.used
		start := r.tail
		r.mu.Unlock()
		if free == 0 {
			select {
			case <-r.space:
				continue
			case <-r.dead:
				return
			}
		}
		n := min(free, len(r.buf)-start, linkReadSize)
		m, err := r.src.Read(r.buf[start : start+n])
		now := time.Now()
		if m > 0 {
			r.mu.Lock()
			r.tail = (r.tail + m) % len(r.buf)
			r.used += m
			r.mu.Unlock()
			if !r.send(linkPacket{off: start, n: m, at: r.l.departure(r.d, now, m)}) {
				return
			}
		}
		if err != nil {
			r.send(linkPacket{eof: true, err: err, at: r.l.departure(r.d, now, 0)})
			return
		}
	}
}

func (r *linkDir) send(p linkPacket) bool {
	select {
	case r.pkts <- p:
		return true
	case <-r.dead:
		return false
	}
}

type closeWriter interface{ CloseWrite() error }

func (r *linkDir) writeLoop() {
	defer close(r.dead)
	t := time.NewTimer(0)
	<-t.C
	defer t.Stop()
	for p := range r.pkts {
		if wait := time.Until(p.at); wait > 0 {
			t.Reset(wait)
			<-t.C
		}
		if p.eof {
			cw, ok := r.dst.(closeWriter)
			if p.err != io.EOF || !ok || cw.CloseWrite() != nil {
				r.fail()
			}
			return
		}
		if _, err := r.dst.Write(r.buf[p.off : p.off+p.n]); err != nil {
			r.fail()
			return
		}
		r.mu.Lock()
		r.used -= p.n
		r.mu.Unlock()
		select {
		case r.space <- struct{}{}:
		default:
		}
	}
}
