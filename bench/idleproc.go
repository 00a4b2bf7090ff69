package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"math/bits"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wsmux/wsmux/mux"
)

// The many-sessions run: the server sessions in this process, the client
// sessions in a second one (a process may hold only so many descriptors),
// the server's heap+stack and goroutines per idle session measured here.

// IdleRun configures RunIdleServer.
type IdleRun struct {
	// Sessions is how many client sessions the second process opens.
	Sessions int
	// Driver is the server sessions' driver (the clients use the event
	// loop, to keep the second process small).
	Driver mux.Driver
	// Client starts the second process given the server's address; it
	// runs RunIdleClients and stays until its standard input closes.
	Client func(addr string) *exec.Cmd
	// Progress, when set, receives a line now and then.
	Progress io.Writer
	// Active sessions of those echo 64 bytes in a loop for Duration once
	// all are idle (0: none), while the others stay idle.
	Active   int
	Duration time.Duration
}

// IdleReport is what RunIdleServer measured on the server side.
type IdleReport struct {
	Sessions          int
	Driver            string
	NoFile            uint64  // the server process's descriptor limit (the runtime raised the soft limit to the hard one)
	BytesPerSession   float64 // heap+stack growth per idle session, after GC
	GoroutinesPerSess float64
	RSSPerSession     float64 // resident set growth per idle session
	HeapBefore        uint64
	HeapAfter         uint64
	Setup             time.Duration
	// The active phase (IdleRun.Active): the client's account of the
	// echoes and the server's heap+stack sampled every second.
	Active   int
	Echo     string
	HeapLow  uint64
	HeapHigh uint64
	Heap     []uint64 // the samples, one a second
}

// String formats the report as the note quotes it.
func (r IdleReport) String() string {
	return fmt.Sprintf("server driver=%s sessions=%d (clients in a second process) ulimit-n=%d\n"+
		"heap+stack: %d -> %d bytes: %.0f B/session\nRSS: %.0f B/session\ngoroutines: %.4f/session\nsetup: %v",
		r.Driver, r.Sessions, r.NoFile, r.HeapBefore, r.HeapAfter, r.BytesPerSession, r.RSSPerSession, r.GoroutinesPerSess, r.Setup.Round(time.Millisecond)) + r.activeString()
}

func (r IdleReport) activeString() string {
	if r.Active == 0 {
		return ""
	}
	var every strings.Builder
	for i := 0; i < len(r.Heap); i += 10 {
		fmt.Fprintf(&every, " %.1f", float64(r.Heap[i])/1e6)
	}
	return fmt.Sprintf("\nactive: %d sessions echoing 64 B while %d stay idle: %s\nserver heap+stack during the run: %d..%d bytes\nserver heap+stack every 10 s (MB):%s",
		r.Active, r.Sessions-r.Active, r.Echo, r.HeapLow, r.HeapHigh, every.String())
}

// RunIdleServer serves r.Sessions sessions opened by the second process,
// each with one stream and one byte each way, and measures this process.
func RunIdleServer(ctx context.Context, r IdleRun) (IdleReport, error) {
	rep := IdleReport{Sessions: r.Sessions, Driver: r.Driver.String(), NoFile: uint64(fdLimit())}
	if need := uint64(r.Sessions) + 64; rep.NoFile > 0 && rep.NoFile < need {
		return rep, fmt.Errorf("bench: %d sessions need %d descriptors, the limit is %d", r.Sessions, need, rep.NoFile)
	}
	// Cancelled on return: ends the serving goroutine and the handlers if
	// the run stops early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return rep, err
	}
	defer ln.Close()
	cfg := &mux.Config{Driver: r.Driver, KeepAliveInterval: time.Minute, KeepAliveTimeout: 3 * time.Minute}
	sessions := make(chan *mux.Session, 64)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			if s, err := mux.Upgrade(w, req, cfg); err == nil {
				select {
				case sessions <- s:
				case <-ctx.Done():
					_ = s.Close()
				}
			}
		}),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	held := make([]*mux.Session, 0, r.Sessions)
	streams := make([]*mux.Stream, 0, r.Sessions)
	servedAll := make(chan struct{})
	defer func() {
		// Runs after the client process is gone (its deferred Wait is
		// later in this function), so the serving goroutine is not
		// blocked on a stream; then held is no longer appended to.
		cancel()
		<-servedAll
		for _, s := range held {
			_ = s.Close()
		}
	}()
	// One goroutine serves the sessions one after the other, as the
	// client opens them: the harness adds none per session.
	served := make(chan error, 1)
	go func() {
		defer close(servedAll)
		buf := make([]byte, 1)
		for len(held) < r.Sessions {
			var s *mux.Session
			select {
			case s = <-sessions:
			case <-ctx.Done():
				served <- ctx.Err()
				return
			}
			held = append(held, s)
			st, err := s.AcceptStream(ctx)
			if err == nil {
				_, err = io.ReadFull(st, buf)
			}
			if err == nil {
				_, err = st.Write(buf)
			}
			if err != nil {
				served <- fmt.Errorf("session %d: %w", len(held), err)
				return
			}
			streams = append(streams, st)
			if r.Progress != nil && len(held)%5000 == 0 {
				fmt.Fprintf(r.Progress, "bench-idle: %d sessions\n", len(held))
			}
		}
		served <- nil
	}()

	rep.HeapBefore = memNow()
	rss0 := rss()
	g0 := runtime.NumGoroutine()
	start := time.Now()
	cmd := r.Client(ln.Addr().String())
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return rep, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return rep, err
	}
	if err := cmd.Start(); err != nil {
		return rep, err
	}
	defer func() {
		_ = stdin.Close() // the clients exit
		_ = cmd.Wait()
	}()
	ready := make(chan error, 1)
	done := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "ready "):
				ready <- nil
			case strings.HasPrefix(line, "done "):
				done <- strings.TrimPrefix(line, "done ")
			case strings.HasPrefix(line, "error "):
				ready <- errors.New("bench-idle client: " + strings.TrimPrefix(line, "error "))
			}
		}
		ready <- errors.New("bench-idle client: exited before it was ready")
		close(done)
	}()
	// Both ends must be done; a client that fails or exits first ends
	// the wait (the server would otherwise wait for its sessions forever).
	for servedOK, readyOK := false, false; !servedOK || !readyOK; {
		select {
		case err := <-served:
			if err != nil {
				return rep, err
			}
			servedOK = true
		case err := <-ready:
			if err != nil {
				return rep, err
			}
			readyOK = true
		}
	}
	rep.Setup = time.Since(start)
	rep.HeapAfter = memNow()
	g1 := runtime.NumGoroutine()
	rep.BytesPerSession = (float64(rep.HeapAfter) - float64(rep.HeapBefore)) / float64(r.Sessions)
	rep.RSSPerSession = (float64(rss()) - float64(rss0)) / float64(r.Sessions)
	rep.GoroutinesPerSess = float64(g1-g0) / float64(r.Sessions)
	if r.Active > 0 {
		if err := activePhase(r, &rep, streams, stdin, done); err != nil {
			return rep, err
		}
	}
	runtime.KeepAlive(streams)
	return rep, nil
}

// activePhase echoes on the first r.Active streams (one application
// goroutine each, as a server would run) while the client drives them for
// r.Duration, and samples this process's heap every second.
func activePhase(r IdleRun, rep *IdleReport, streams []*mux.Stream, stdin io.Writer, done <-chan string) error {
	rep.Active = min(r.Active, len(streams))
	for _, st := range streams[:rep.Active] {
		go func() {
			buf := make([]byte, 64)
			for {
				if _, err := io.ReadFull(st, buf); err != nil {
					return
				}
				if _, err := st.Write(buf); err != nil {
					return
				}
			}
		}()
	}
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		return err
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	rep.HeapLow = ^uint64(0)
	for {
		select {
		case <-tick.C:
			h := memNow()
			rep.HeapLow, rep.HeapHigh = min(rep.HeapLow, h), max(rep.HeapHigh, h)
			rep.Heap = append(rep.Heap, h)
		case line, ok := <-done:
			if !ok {
				return errors.New("bench-idle client: exited during the active phase")
			}
			rep.Echo = line
			return nil
		}
	}
}

// RunIdleClients opens n sessions to addr (the second process), each with
// one stream and one byte each way, prints "ready n" to out and holds them
// until in closes.
func RunIdleClients(ctx context.Context, addr string, n, active int, d time.Duration, in io.Reader, out io.Writer) error {
	cfg := &mux.Config{Driver: mux.DriverEventLoop, KeepAliveInterval: time.Minute, KeepAliveTimeout: 3 * time.Minute}
	held := make([]*mux.Session, 0, n)
	defer func() {
		for _, s := range held {
			_ = s.Close()
		}
	}()
	buf := []byte{1}
	streams := make([]*mux.Stream, 0, n)
	for i := range n {
		s, err := mux.Dial(ctx, "ws://"+addr+"/", cfg)
		if err == nil {
			held = append(held, s)
			var st *mux.Stream
			if st, err = s.OpenEarly(nil); err == nil {
				if _, err = st.Write(buf); err == nil {
					_, err = io.ReadFull(st, buf)
				}
				streams = append(streams, st)
			}
		}
		if err != nil {
			fmt.Fprintf(out, "error session %d: %v\n", i, err)
			return err
		}
	}
	fmt.Fprintf(out, "ready %d\n", n)
	br := bufio.NewReader(in)
	if active > 0 {
		if line, err := br.ReadString('\n'); err != nil || line != "go\n" {
			return nil
		}
		fmt.Fprintf(out, "done %s\n", echoLoad(streams[:min(active, len(streams))], d))
	}
	_, _ = io.Copy(io.Discard, br)
	return nil
}

// echoLoad echoes 64 bytes in a loop on every stream for d and describes
// the round trips: how many, the fewest one stream completed (none
// starved), and the 50th, 99th percentiles and the maximum.
func echoLoad(streams []*mux.Stream, d time.Duration) string {
	var h latencyHist
	counts := make([]int, len(streams))
	var wg sync.WaitGroup
	end := time.Now().Add(d)
	for i, st := range streams {
		wg.Go(func() {
			buf := make([]byte, 64)
			for time.Now().Before(end) {
				t := time.Now()
				if _, err := st.Write(buf); err != nil {
					return
				}
				if _, err := io.ReadFull(st, buf); err != nil {
					return
				}
				h.add(time.Since(t))
				counts[i]++
			}
		})
	}
	wg.Wait()
	total, least := 0, counts[0]
	for _, c := range counts {
		total += c
		least = min(least, c)
	}
	return fmt.Sprintf("%d echoes in %v (%.0f/s), fewest on one session %d, p50 %v p99 %v max %v",
		total, d, float64(total)/d.Seconds(), least, h.quantile(0.5), h.quantile(0.99), h.max())
}

// latencyHist is a log-linear histogram of durations (16 buckets per
// power of two of microseconds: about 6 % resolution), safe for
// concurrent use.
type latencyHist struct {
	mu      sync.Mutex
	buckets [64 * 16]uint64
	n       uint64
	top     time.Duration
}

func (h *latencyHist) add(d time.Duration) {
	us := uint64(max(d/time.Microsecond, 1))
	e := bits.Len64(us) - 1
	sub := 0
	if e >= 4 {
		sub = int((us >> (e - 4)) & 15)
	} else {
		sub = int(us<<(4-e)) & 15
	}
	h.mu.Lock()
	h.buckets[e*16+sub]++
	h.n++
	h.top = max(h.top, d)
	h.mu.Unlock()
}

func (h *latencyHist) quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	want := uint64(q * float64(h.n))
	var seen uint64
	for i, c := range h.buckets {
		seen += c
		if c > 0 && seen >= want {
			e, sub := i/16, i%16
			us := (uint64(16+sub) << e) >> 4
			return time.Duration(max(us, 1)) * time.Microsecond
		}
	}
	return h.top
}

func (h *latencyHist) max() time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.top
}

// rss returns the resident set size of this process (0 if unknown).
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseUint(f[1], 10, 64)
	return pages * uint64(os.Getpagesize())
}
