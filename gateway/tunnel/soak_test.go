package tunnel

import (
	"bytes"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// soakDuration is 3 s by default; WSMUX_SOAK=30s (any Go duration) runs the
// long version.
func soakDuration(t *testing.T) time.Duration {
	if v := os.Getenv("WSMUX_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("WSMUX_SOAK=%q: %v", v, err)
		}
		return d
	}
	if testing.Short() {
		return time.Second
	}
	return 3 * time.Second
}

// TestSoak200Connections tunnels 200 concurrent TCP connections through one
// session to an echo server, each writing random-sized chunks for the soak
// duration while reading the echo, then checks every connection's sha256
// both ways, and that no goroutine or file descriptor outlives the run.
func TestSoak200Connections(t *testing.T) {
	const conns = 200
	dur := soakDuration(t)
	// Start the runtime's network poller (its descriptors stay) first.
	if ln, err := net.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
	}
	ignore := goleak.IgnoreCurrent()
	fds := openFDs(t)
	var total atomic.Int64

	t.Run("run", func(t *testing.T) {
		echo := echoServer(t)
		e := startServer(t, echo)
		_, addrs := startForwarder(t, e.hs.URL, testToken, echo)
		stopAt := time.Now().Add(dur)
		var wg sync.WaitGroup
		for i := range conns {
			wg.Go(func() {
				if err := soakConn(addrs[0], stopAt, uint64(i), &total); err != nil {
					t.Errorf("conn %d: %v", i, err)
				}
			})
		}
		wg.Wait()
		if n := e.srv.Metrics().Sessions.Len(); n != 1 {
			t.Errorf("%d sessions, want all connections over one", n)
		}
	})
	t.Logf("%d connections moved %d MiB each way in %v", conns, total.Load()>>20, dur)

	// Everything is closed now: no goroutine or descriptor may remain.
	deadline := time.Now().Add(5 * time.Second)
	for openFDs(t) > fds && time.Now().Before(deadline) {
		// TCP-to-TCP io.Copy (the echo server) splices through pipes the
		// runtime pools; the pool lets them go (finalizers) after GCs.
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("file descriptors: %d before, %d after: %v", fds, n, fdTargets())
	}
	goleak.VerifyNone(t, ignore)
}

// soakInFlight bounds the bytes a soak connection has written and not yet
// read back: the echo keeps up, and the drain at the end is short.
const soakInFlight = 256 << 10

func soakConn(addr string, stopAt time.Time, seed uint64, total *atomic.Int64) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(stopAt.Add(60 * time.Second))
	sent := sha256.New()
	var back atomic.Int64              // bytes read back so far
	progress := make(chan struct{}, 1) // the reader read some
	readDone := make(chan struct{})
	werr := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(seed, 42))
		src := soakData()
		var out int64
		for time.Now().Before(stopAt) {
			for out-back.Load() > soakInFlight {
				select {
				case <-progress:
				case <-readDone:
					werr <- io.ErrUnexpectedEOF
					return
				}
			}
			// A random-sized run of the random block at a random offset:
			// every connection's bytes differ, and making them costs no
			// CPU (bytes drawn one by one kept 200 goroutines busy enough,
			// under -race on 2 cores, to starve the tunnel's own for the
			// whole OpenTimeout).
			n := 1 + r.IntN(64<<10)
			off := r.IntN(len(src) - n)
			buf := src[off : off+n]
			sent.Write(buf)
			if _, err := c.Write(buf); err != nil {
				werr <- err
				return
			}
			out += int64(n)
			total.Add(int64(n))
		}
		werr <- c.(*net.TCPConn).CloseWrite()
	}()
	got := sha256.New()
	buf := make([]byte, 64<<10)
	var rerr error
	for {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		back.Add(int64(n))
		select {
		case progress <- struct{}{}:
		default:
		}
		if err != nil {
			if err != io.EOF {
				rerr = err
			}
			break
		}
	}
	close(readDone)
	if err := <-werr; err != nil {
		return err
	}
	if rerr != nil {
		return rerr
	}
	if !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// soakData is 1 MiB of random bytes the soak's writers draw runs from.
var soakData = sync.OnceValue(func() []byte {
	r := rand.New(rand.NewPCG(7, 42))
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
})

func fdTargets() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+l)
	}
	return out
}
