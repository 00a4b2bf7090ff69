package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/internal/testnet"
)

// eventLog is a log destination that counts the Forwarder's drop and
// resume lines and lets a test wait for them.
type eventLog struct {
	mu      sync.Mutex
	b       bytes.Buffer
	lost    int
	resumed int
	changed chan struct{}
}

func newEventLog() *eventLog { return &eventLog{changed: make(chan struct{})} }

func (l *eventLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.b.Write(p)
	s := string(p)
	l.lost += strings.Count(s, "tunnel: connection lost")
	l.resumed += strings.Count(s, "tunnel: session resumed")
	close(l.changed)
	l.changed = make(chan struct{})
	return len(p), nil
}

// wait waits until at least lost drops and resumed resumes were logged.
func (l *eventLog) wait(t *testing.T, lost, resumed int) {
	t.Helper()
	for {
		l.mu.Lock()
		ok, ch := l.lost >= lost && l.resumed >= resumed, l.changed
		l.mu.Unlock()
		if ok {
			return
		}
		<-ch
	}
}

func (l *eventLog) counts() (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost, l.resumed
}

func (l *eventLog) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// transfer is one tunnelled connection to an echo target: what is
// written is hashed, and a reader hashes the echo as it arrives.
type transfer struct {
	c        net.Conn
	rng      *rand.ChaCha8
	sent     hash.Hash
	nsent    int
	mu       sync.Mutex
	got      hash.Hash
	ngot     int
	grew     chan struct{}
	readErr  error
	readDone chan struct{}
}

func startTransfer(t *testing.T, addr string) *transfer {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	x := &transfer{c: c, rng: rand.NewChaCha8([32]byte{7}), sent: sha256.New(), got: sha256.New(),
		grew: make(chan struct{}), readDone: make(chan struct{})}
	go func() {
		defer close(x.readDone)
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Read(buf)
			x.mu.Lock()
			x.got.Write(buf[:n])
			x.ngot += n
			close(x.grew)
			x.grew = make(chan struct{})
			if err != nil {
				if err != io.EOF {
					x.readErr = err
				}
				x.mu.Unlock()
				return
			}
			x.mu.Unlock()
		}
	}()
	return x
}

// write sends n more bytes of the pattern.
func (x *transfer) write(t *testing.T, n int) {
	t.Helper()
	if err := x.send(n); err != nil {
		t.Fatal(err)
	}
}

func (x *transfer) send(n int) error {
	buf := make([]byte, n)
	_, _ = x.rng.Read(buf)
	if _, err := x.c.Write(buf); err != nil {
		return fmt.Errorf("write after %d bytes: %w", x.nsent, err)
	}
	x.sent.Write(buf)
	x.nsent += n
	return nil
}

// echoed waits until everything written came back.
func (x *transfer) echoed(t *testing.T) {
	t.Helper()
	for {
		x.mu.Lock()
		n, ch, done := x.ngot, x.grew, x.readErr != nil
		x.mu.Unlock()
		if n >= x.nsent || done {
			return
		}
		select {
		case <-ch:
		case <-x.readDone:
		}
	}
}

// TestForwardThroughNginxResumes: a tunnelled echo connection through a
// real nginx with proxy_read_timeout 2s goes through, in order, the idle
// cut of that timeout, an `nginx -s reload` during the transfer (the old
// worker closes its connections a second later) and a full restart of
// nginx during the transfer; the session resumes each time, and every byte
// written comes back once, in order (sha256 of both directions' streams).
func TestForwardThroughNginxResumes(t *testing.T) {
	echo := echoServer(t)
	srv, err := NewServer(ServerConfig{Allow: []string{echo}, Auth: auth.New([]string{testToken}, nil),
		Logger: testLogger(t), ResumeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		srv.Metrics().Sessions.Drain(ctx)
		srv.Wait()
	})
	ngx := testnet.StartNginx(t, strings.TrimPrefix(hs.URL, "http://"), "proxy_read_timeout 2s; proxy_send_timeout 2s;")
	log := newEventLog()
	f, err := NewForwarder(ClientConfig{Server: "http://" + ngx.Addr, Token: testToken,
		Logger:       slog.New(slog.NewTextHandler(io.MultiWriter(log, testnet.LogWriter{T: t}), nil)),
		DrainTimeout: 5 * time.Second, ResumeTimeout: time.Minute}, []Forward{{Local: "127.0.0.1:0", Target: echo}})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Connect(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	f.mu.Lock()
	sess := f.sess
	f.mu.Unlock()
	x := startTransfer(t, f.Addrs()[0].String())

	// 1. Data, then silence: nginx ends the idle connection after 2 s.
	x.write(t, 4<<20)
	x.echoed(t)
	log.wait(t, 1, 1)

	// 2. nginx -s reload in the middle of a transfer: writes go on until
	// the old worker has cut the connection, and the session resumes on
	// a new worker.
	x.write(t, 1<<20)
	ngx.Reload(t)
	lost, _ := log.counts()
	for {
		x.write(t, 256<<10)
		if l, _ := log.counts(); l > lost {
			break
		}
	}
	log.wait(t, lost+1, lost+1)

	// 3. A full restart during the transfer: nginx stops (every
	// connection closed), data is written meanwhile, nginx starts again.
	x.write(t, 1<<20)
	lost, _ = log.counts()
	ngx.Stop()
	wrote := make(chan error, 1)
	go func() { wrote <- x.send(2 << 20) }() // may wait for the resume
	log.wait(t, lost+1, 0)
	ngx.Start(t)
	log.wait(t, lost+1, lost+1)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	x.write(t, 4<<20)

	if err := x.c.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	<-x.readDone
	if x.readErr != nil {
		t.Fatalf("echo read: %v\n%s", x.readErr, log.String())
	}
	if x.ngot != x.nsent || !bytes.Equal(x.got.Sum(nil), x.sent.Sum(nil)) {
		t.Fatalf("echoed %d bytes of %d; sha256 equal: %v", x.ngot, x.nsent, bytes.Equal(x.got.Sum(nil), x.sent.Sum(nil)))
	}
	f.mu.Lock()
	same := f.sess == sess
	f.mu.Unlock()
	st := sess.Stats()
	if !same || st.Suspends < 3 || st.Resumes != st.Suspends {
		t.Fatalf("one session throughout: %v; %d suspensions, %d resumes", same, st.Suspends, st.Resumes)
	}
	if strings.Contains(log.String(), "session lost") {
		t.Fatalf("a session was lost:\n%s", log.String())
	}
	t.Logf("through nginx: %d bytes each way, %d suspensions, all resumed", x.nsent, st.Suspends)
}
