package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
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
}

// String formats the report as the note quotes it.
func (r IdleReport) String() string {
	return fmt.Sprintf("server driver=%s sessions=%d (clients in a second process) ulimit-n=%d\n"+
		"heap+stack: %d -> %d bytes: %.0f B/session\nRSS: %.0f B/session\ngoroutines: %.4f/session\nsetup: %v",
		r.Driver, r.Sessions, r.NoFile, r.HeapBefore, r.HeapAfter, r.BytesPerSession, r.RSSPerSession, r.GoroutinesPerSess, r.Setup.Round(time.Millisecond))
}

// RunIdleServer serves r.Sessions sessions opened by the second process,
// each with one stream and one byte each way, and measures this process.
func RunIdleServer(ctx context.Context, r IdleRun) (IdleReport, error) {
	rep := IdleReport{Sessions: r.Sessions, Driver: r.Driver.String(), NoFile: uint64(fdLimit())}
	if need := uint64(r.Sessions) + 64; rep.NoFile > 0 && rep.NoFile < need {
		return rep, fmt.Errorf("bench: %d sessions need %d descriptors, the limit is %d", r.Sessions, need, rep.NoFile)
	}
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
				sessions <- s
			}
		}),
		ErrorLog:          log.New(io.Discard, "", 0),
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	held := make([]*mux.Session, 0, r.Sessions)
	streams := make([]*mux.Stream, 0, r.Sessions)
	defer func() {
		for _, s := range held {
			_ = s.Close()
		}
	}()
	// One goroutine serves the sessions one after the other, as the
	// client opens them: the harness adds none per session.
	served := make(chan error, 1)
	go func() {
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
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "ready ") {
				ready <- nil
			} else if strings.HasPrefix(line, "error ") {
				ready <- errors.New("bench-idle client: " + strings.TrimPrefix(line, "error "))
			}
		}
		ready <- errors.New("bench-idle client: exited before it was ready")
	}()
	if err := <-served; err != nil {
		return rep, err
	}
	if err := <-ready; err != nil {
		return rep, err
	}
	rep.Setup = time.Since(start)
	rep.HeapAfter = memNow()
	g1 := runtime.NumGoroutine()
	rep.BytesPerSession = (float64(rep.HeapAfter) - float64(rep.HeapBefore)) / float64(r.Sessions)
	rep.RSSPerSession = (float64(rss()) - float64(rss0)) / float64(r.Sessions)
	rep.GoroutinesPerSess = float64(g1-g0) / float64(r.Sessions)
	runtime.KeepAlive(streams)
	return rep, nil
}

// RunIdleClients opens n sessions to addr (the second process), each with
// one stream and one byte each way, prints "ready n" to out and holds them
// until in closes.
func RunIdleClients(ctx context.Context, addr string, n int, in io.Reader, out io.Writer) error {
	cfg := &mux.Config{Driver: mux.DriverEventLoop, KeepAliveInterval: time.Minute, KeepAliveTimeout: 3 * time.Minute}
	held := make([]*mux.Session, 0, n)
	defer func() {
		for _, s := range held {
			_ = s.Close()
		}
	}()
	buf := []byte{1}
	for i := range n {
		s, err := mux.Dial(ctx, "ws://"+addr+"/", cfg)
		if err == nil {
			held = append(held, s)
			var st *mux.Stream
			if st, err = s.OpenEarly(nil); err == nil {
				if _, err = st.Write(buf); err == nil {
					_, err = io.ReadFull(st, buf)
				}
			}
		}
		if err != nil {
			fmt.Fprintf(out, "error session %d: %v\n", i, err)
			return err
		}
	}
	fmt.Fprintf(out, "ready %d\n", n)
	_, _ = io.Copy(io.Discard, in)
	return nil
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
