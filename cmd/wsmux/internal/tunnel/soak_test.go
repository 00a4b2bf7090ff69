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

func soakConn(addr string, stopAt time.Time, seed uint64, total *atomic.Int64) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(stopAt.Add(60 * time.Second))
	sent := sha256.New()
	werr := make(chan error, 1)
	go func() {
		r := rand.New(rand.NewPCG(seed, 42))
		buf := make([]byte, 64<<10)
		for time.Now().Before(stopAt) {
			n := 1 + r.IntN(len(buf))
			for i := range buf[:n] {
				buf[i] = byte(r.Uint32())
			}
			sent.Write(buf[:n])
			if _, err := c.Write(buf[:n]); err != nil {
				werr <- err
				return
			}
			total.Add(int64(n))
		}
		werr <- c.(*net.TCPConn).CloseWrite()
	}()
	got := sha256.New()
	_, rerr := io.Copy(got, c)
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

func fdTargets() []string {
	ents, _ := os.ReadDir("/proc/self/fd")
	var out []string
	for _, e := range ents {
		l, _ := os.Readlink("/proc/self/fd/" + e.Name())
		out = append(out, e.Name()+"="+l)
	}
	return out
}
