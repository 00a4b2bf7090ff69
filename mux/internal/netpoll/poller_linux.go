//go:build linux

package netpoll

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Supported reports whether conn can be registered with a Poller: a plain
// TCP or Unix stream socket. TLS connections (crypto/tls buffers decrypted
// bytes the poller cannot see), pipes and wrappers cannot.
func Supported(conn net.Conn) bool {
	switch c := conn.(type) {
	case *net.TCPConn:
		return true
	case *net.UnixConn:
		a := c.LocalAddr()
		return a != nil && a.Network() == "unix"
	}
	return false
}

// Poller watches registered sockets with one edge-triggered epoll instance
// and calls their Handlers when they become readable or writable.
type Poller struct {
	epfd int
	evfd int             // eventfd: wakes the loop for Close and the last Remove
	ep   *os.File        // epfd, registered with the Go runtime's poller
	epRC syscall.RawConn // waits for epfd's readiness as a parked goroutine
	pool *Pool           // runs the Tasks the Handlers return

	mu      sync.Mutex
	regs    map[int32]*Registration // by descriptor
	gen     uint32
	running bool // the loop goroutine runs
	closed  bool
	done    chan struct{} // closed when the loop goroutine exits (nil: none)
}

// New returns a Poller whose Handlers' Tasks run on pool. Its goroutine
// starts with the first registration and exits when the last one is
// removed.
func New(pool *Pool) (*Poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("netpoll: epoll_create1: %w", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: eventfd: %w", err)
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLET, Fd: -1}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: epoll_ctl: %w", err)
	}
	// The epoll descriptor is itself pollable: registered with the Go
	// runtime's poller, the loop waits for it as a parked goroutine, woken
	// by the scheduler, instead of in a blocking epoll_wait that puts a
	// thread to sleep and wakes it (two context switches) per event.
	if err := unix.SetNonblock(epfd, true); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, fmt.Errorf("netpoll: epoll descriptor: %w", err)
	}
	ep := os.NewFile(uintptr(epfd), "epoll")
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		unix.Close(evfd)
		return nil, fmt.Errorf("netpoll: epoll descriptor: %w", err)
	}
	return &Poller{epfd: epfd, evfd: evfd, ep: ep, epRC: rc, pool: pool, regs: make(map[int32]*Registration)}, nil
}

// Registration is one socket registered with a Poller. Its zero value is
// ready for Add. Read and Write must not be called concurrently with
// themselves (one goroutine reads at a time, one writes at a time).
type Registration struct {
	p   *Poller
	raw syscall.RawConn
	h   Handler
	fd  int32
	gen uint32
}

// rawIO carries a read's or write's arguments and results through the
// RawConn callback. Pooled, with the callbacks bound once, so that a read
// or write allocates nothing and an idle registration holds none.
type rawIO struct {
	b      []byte
	v      [][]byte
	n      int
	err    error
	read   func(uintptr) bool
	write  func(uintptr) bool
	writev func(uintptr) bool
}

var rawIOs = sync.Pool{New: func() any {
	x := new(rawIO)
	x.read, x.write, x.writev = x.doRead, x.doWrite, x.doWritev
	return x
}}

// Add registers conn (see Supported) with r: h is called whenever the
// socket becomes readable, writable or fails. Events are edge-triggered:
// after one, the reader must read until ErrWouldBlock (or EOF) before the
// next readable event is guaranteed, and likewise for writes.
func (p *Poller) Add(r *Registration, conn net.Conn, h Handler) error {
	sc, ok := conn.(syscall.Conn)
	if !ok || !Supported(conn) {
		return ErrUnsupported
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var fd int32 = -1
	if err := raw.Control(func(f uintptr) { fd = int32(f) }); err != nil {
		return err
	}
	r.p, r.raw, r.h, r.fd = p, raw, h, fd
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	p.gen++
	r.gen = p.gen
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: fd, Pad: int32(r.gen)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, int(fd), &ev); err != nil {
		return fmt.Errorf("netpoll: epoll_ctl add: %w", err)
	}
	p.regs[fd] = r
	if !p.running {
		p.running = true
		p.done = make(chan struct{})
		go p.loop(p.done)
	}
	return nil
}

// Remove unregisters r; no event for it is delivered once Remove has
// returned, except one the loop was already delivering. Call it before
// closing the connection. It is idempotent.
func (r *Registration) Remove() {
	p := r.p
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cur := p.regs[r.fd]; cur != r {
		return // removed already (the descriptor may be another socket's now)
	}
	delete(p.regs, r.fd)
	// If the connection was closed already, the kernel dropped it from the
	// set: the error is expected.
	_ = r.raw.Control(func(f uintptr) {
		_ = unix.EpollCtl(p.epfd, unix.EPOLL_CTL_DEL, int(f), nil)
	})
	if len(p.regs) == 0 {
		p.kick()
	}
}

// Read reads into b without blocking: ErrWouldBlock when nothing is
// there, io.EOF at the peer's end of stream.
func (r *Registration) Read(b []byte) (int, error) { return r.rawIO(b, false) }

func (x *rawIO) doRead(fd uintptr) bool {
	n, err := unix.Read(int(fd), x.b)
	switch {
	case err == unix.EAGAIN:
		x.n, x.err = 0, ErrWouldBlock
	case err == unix.EINTR:
		return false
	case err != nil:
		x.n, x.err = 0, err
	case n == 0 && len(x.b) > 0:
		x.n, x.err = 0, errEOF
	default:
		x.n, x.err = n, nil
	}
	return true
}

// Write writes b without blocking and returns how much the socket took:
// n < len(b) with ErrWouldBlock when its buffer is full.
func (r *Registration) Write(b []byte) (int, error) { return r.rawIO(b, true) }

// Writev writes the buffers of v, in order, with one non-blocking system
// call and returns how many bytes the socket took: fewer than all with
// ErrWouldBlock when its buffer is full. At most MaxVec buffers go in one
// call.
func (r *Registration) Writev(v [][]byte) (int, error) {
	x := rawIOs.Get().(*rawIO)
	x.v = v[:min(len(v), MaxVec)]
	err := r.raw.Write(x.writev)
	n, ioErr := x.n, x.err
	x.v, x.err = nil, nil
	rawIOs.Put(x)
	if err != nil {
		return 0, err
	}
	return n, ioErr
}

// MaxVec is the most buffers one Writev writes (the kernel's IOV_MAX).
const MaxVec = 1024

func (x *rawIO) doWritev(fd uintptr) bool {
	total := 0
	for _, b := range x.v {
		total += len(b)
	}
	n, err := unix.Writev(int(fd), x.v)
	switch {
	case err == unix.EAGAIN:
		x.n, x.err = 0, ErrWouldBlock
	case err == unix.EINTR:
		return false
	case err != nil:
		x.n, x.err = 0, err
	case n < total:
		x.n, x.err = n, ErrWouldBlock
	default:
		x.n, x.err = n, nil
	}
	return true
}

// rawIO runs one non-blocking read or write of b on the socket, with a
// pooled rawIO carrying b and the result through RawConn's callback.
func (r *Registration) rawIO(b []byte, write bool) (int, error) {
	x := rawIOs.Get().(*rawIO)
	x.b = b
	var err error
	if write {
		err = r.raw.Write(x.write)
	} else {
		err = r.raw.Read(x.read)
	}
	n, ioErr := x.n, x.err
	x.b, x.err = nil, nil
	rawIOs.Put(x)
	if err != nil {
		return 0, err
	}
	return n, ioErr
}

func (x *rawIO) doWrite(fd uintptr) bool {
	n, err := unix.Write(int(fd), x.b)
	switch {
	case err == unix.EAGAIN:
		x.n, x.err = 0, ErrWouldBlock
	case err == unix.EINTR:
		return false
	case err != nil:
		x.n, x.err = 0, err
	case n < len(x.b):
		x.n, x.err = n, ErrWouldBlock
	default:
		x.n, x.err = n, nil
	}
	return true
}

// kick wakes the loop goroutine (p.mu held or not).
func (p *Poller) kick() {
	var one = [8]byte{1}
	_, _ = unix.Write(p.evfd, one[:])
}

// Close stops the Poller: registrations stay in place until removed, but
// no event is delivered any more and Add fails. It waits for the loop
// goroutine to exit.
func (p *Poller) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	done := p.done
	p.kick()
	p.mu.Unlock()
	if done != nil {
		<-done
	}
	unix.Close(p.evfd)
	return p.ep.Close()
}

// loop waits for events and delivers them until the Poller is closed or
// has no registrations left.
func (p *Poller) loop(done chan struct{}) {
	defer close(done)
	var events [128]unix.EpollEvent
	var tasks [len(events)]Task
	var n int
	wait := func(fd uintptr) bool {
		var err error
		n, err = unix.EpollWait(int(fd), events[:], 0)
		if err != nil {
			n = 0
			return !errors.Is(err, unix.EINTR) && !errors.Is(err, unix.EAGAIN)
		}
		return n > 0 // none: park until the runtime's poller sees epfd readable
	}
	for {
		if err := p.epRC.Read(wait); err != nil {
			n = 0 // closed under us; the checks below end the loop
		}
		p.mu.Lock()
		if p.closed || len(p.regs) == 0 {
			p.running = false
			p.mu.Unlock()
			return
		}
		k := 0
		for i := range n {
			ev := &events[i]
			if ev.Fd < 0 {
				var buf [8]byte
				_, _ = unix.Read(p.evfd, buf[:])
				continue
			}
			r := p.regs[ev.Fd]
			if r == nil || r.gen != uint32(ev.Pad) {
				continue // removed, or the descriptor is another socket's now
			}
			var e Event
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				e |= Readable
			}
			if ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				e |= Hangup
			}
			if ev.Events&(unix.EPOLLOUT|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				e |= Writable
			}
			// Handlers only record the event: they never block, so
			// calling them under p.mu keeps Remove's promise.
			if t := r.h.OnReady(e); t != nil {
				tasks[k] = t
				k++
			}
		}
		p.mu.Unlock()
		if k == 0 {
			continue
		}
		if k == 1 {
			// A lone event: no other socket waits for this goroutine, so
			// it runs the Task itself instead of handing it to a worker.
			t := tasks[0]
			tasks[0] = nil
			t.Run()
			continue
		}
		for i := range k {
			p.pool.Submit(tasks[i])
			tasks[i] = nil
		}
	}
}
