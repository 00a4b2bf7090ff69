package tunnel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"

	"github.com/gobwas/ws"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/mux"
)

// bufferServer runs a tunnel server whose callers get one session each
// and bufLimit bytes of buffer (0: wsmux's defaults).
func bufferServer(t *testing.T, bufLimit int64, allow ...string) (*Server, string) {
	t.Helper()
	var d net.Dialer
	srv, err := NewServer(ServerConfig{
		Allow:  allow,
		Auth:   auth.New([]string{tokA, tokB}, nil),
		Logger: testLogger(t),
		Limits: ops.Limits{SessionsPerCaller: 1, BufferPerCaller: bufLimit},
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err == nil {
				// Little kernel buffering toward the targets: what A
				// sent and no target read is then in the server's memory.
				_ = c.(*net.TCPConn).SetWriteBuffer(sockBuf)
			}
			return c, err
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		srv.Metrics().Sessions.Drain(context.Background())
		srv.Wait()
	})
	return srv, wsURL(t, hs.URL)
}

const tokA, tokB = "token-of-caller-a", "token-of-caller-b"

// sockBuf is the socket buffer size asked for on both ends of target
// connections (the kernel rounds it up, to a few KiB).
const sockBuf = 4 << 10

func dialAs(t *testing.T, u, tok string) *mux.Session {
	t.Helper()
	s, err := (&mux.Dialer{Header: http.Header{"Authorization": {"Bearer " + tok}}}).Dial(context.Background(), u)
	if err != nil {
		t.Fatalf("session of %s: %v", tok, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// liveHeap is the heap still in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// TestBufferLimitHoldsOneCaller: caller A pushes 4 x 32 MiB at targets that
// never read. A is held at its
// --max-buffer-per-caller of 1 MiB (a 512 KiB receive window for its one
// session): its writes wait, nothing of A is refused or reset, and what A
// sent that no target read, which the server holds, stays under that
// window plus the splices' copy buffers and a few KiB of kernel buffers
// (wsmux's default windows, 1 MiB at first, fail this); the process's live
// heap grows by less than 16 MiB. Meanwhile caller B's echo of 8 MiB comes
// back with the same sha256.
func TestBufferLimitHoldsOneCaller(t *testing.T) {
	const limit = 1 << 20
	const streams, perStream = 4, 32 << 20
	hold := make(chan struct{})
	defer close(hold)
	stall := tcpServer(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetReadBuffer(sockBuf)
		<-hold
	})
	echo := echoServer(t)
	srv, u := bufferServer(t, limit, stall, echo)
	payload := randBytes(perStream)
	dataB := randBytes(8 << 20)
	base := liveHeap()

	a := dialAs(t, u, tokA)
	ended := make(chan error, streams)
	for range streams {
		st, err := a.Open(context.Background(), http.Header{TargetHeader: {stall}})
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			_, err := st.Write(payload)
			ended <- err
		}()
	}
	// A is held once a PING round trip (everything A sent before it has
	// arrived, and any credit the server granted has come back) passes
	// with nothing sent but the PING.
	prev := a.Stats().BytesOut
	for {
		if _, err := a.Ping(context.Background()); err != nil {
			t.Fatal(err)
		}
		cur := a.Stats().BytesOut
		if cur-prev < 64 {
			break
		}
		prev = cur
	}
	held := int64(a.Stats().BytesOut) // no target read any of it
	// The server's bound: its receive window (half the limit), one copy
	// buffer per splice, and the kernel's minimum socket buffers.
	bound := int64(limit/2 + streams*(32<<10+64<<10))
	t.Logf("the server holds about %d KiB of A's bytes (bound %d KiB)", held>>10, bound>>10)
	if held > bound {
		t.Errorf("A got %d bytes to the server that no target read, want at most %d", held, bound)
	}

	b := dialAs(t, u, tokB)
	st, err := b.Open(context.Background(), http.Header{TargetHeader: {echo}})
	if err != nil {
		t.Fatalf("B's stream with A held: %v", err)
	}
	go func() { st.Write(dataB); st.CloseWrite() }()
	h := sha256.New()
	n, err := io.Copy(h, st)
	want := sha256.Sum256(dataB)
	if err != nil || n != int64(len(dataB)) || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Fatalf("B's echo with A held: %d of %d bytes, %v", n, len(dataB), err)
	}

	if grew := liveHeap() - base; grew > 16<<20 {
		t.Errorf("live heap grew by %d bytes with A held, want at most 16 MiB", grew)
	}
	select {
	case err := <-ended:
		t.Fatalf("A's write ended (%v): A must be held, not refused", err)
	default:
	}
	if err := a.Err(); err != nil {
		t.Fatalf("A's session ended: %v", err)
	}
	body := scrape(t, srv.Metrics())
	for _, want := range []string{
		`wsmux_limit_refusals_total{limit="buffer_bytes_per_caller"} 0`,
		`wsmux_errors_total{code="FLOW_CONTROL_ERROR"} 0`,
		`wsmux_limit{limit="buffer_bytes_per_caller"} 1.048576e+06`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestBufferLimitRefusesOverflow: a raw client that sends beyond the
// session window its buffer limit sized (512 KiB here) has its session
// ended with FLOW_CONTROL_ERROR, counted as a refusal by
// buffer_bytes_per_caller; a compliant session of another caller is not
// disturbed.
func TestBufferLimitRefusesOverflow(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	sink := tcpServer(t, func(c net.Conn) {
		_ = c.(*net.TCPConn).SetReadBuffer(sockBuf)
		<-hold
	})
	echo := echoServer(t)
	srv, u := bufferServer(t, 1<<20, sink, echo)

	conn, _, _, err := ws.Dialer{Protocols: []string{mux.Subprotocol},
		Header: ws.HandshakeHeaderHTTP(http.Header{"Authorization": {"Bearer " + tokA}})}.Dial(context.Background(), u)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// SETTINGS, four opens and 224 KiB on each in one message: within
	// every stream's window (256 KiB), beyond the session window the limit
	// sized (512 KiB; wsmux's default is 1 MiB) by more than the splices
	// can move on to the sinks (small socket buffers) while it arrives.
	msg := frame.AppendSettings(nil, &frame.Settings{})
	lim := frame.DefaultBlockLimits()
	chunk := make([]byte, 16<<10)
	for id := uint32(1); id <= 7; id += 2 {
		if msg, err = frame.AppendHeaders(msg, id, frame.FlagSYN, map[string][]string{TargetHeader: {sink}}, &lim); err != nil {
			t.Fatal(err)
		}
		for range 14 {
			if msg, err = frame.AppendData(msg, id, false, chunk); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := ws.WriteFrame(conn, ws.MaskFrame(ws.NewBinaryFrame(msg))); err != nil {
		t.Fatal(err)
	}
	// B echoes meanwhile.
	b := dialAs(t, u, tokB)
	st, err := b.Open(context.Background(), http.Header{TargetHeader: {echo}})
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(1 << 20)
	go func() { st.Write(data); st.CloseWrite() }()
	got, err := io.ReadAll(st)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("B's echo: %d of %d bytes, %v", len(got), len(data), err)
	}
	if code := readGoAway(t, conn); code != frame.FlowControlError {
		t.Errorf("A's session ended with GOAWAY %v, want FLOW_CONTROL_ERROR", code)
	}
	conn.Close()
	b.Close()
	srv.Metrics().Sessions.Drain(context.Background()) // the count comes before a session unregisters
	body := scrape(t, srv.Metrics())
	for _, want := range []string{
		`wsmux_limit_refusals_total{limit="buffer_bytes_per_caller"} 1`,
		`wsmux_errors_total{code="FLOW_CONTROL_ERROR"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// readGoAway reads the server's messages on conn until its GOAWAY and
// returns the code.
func readGoAway(t *testing.T, conn net.Conn) frame.ErrorCode {
	t.Helper()
	lim := frame.DefaultLimits()
	for {
		f, err := ws.ReadFrame(conn)
		if err != nil {
			t.Fatalf("no GOAWAY before the connection ended: %v", err)
		}
		if f.Header.OpCode != ws.OpBinary {
			continue
		}
		for b := f.Payload; len(b) > 0; {
			fr, n, err := frame.Parse(b, &lim)
			if err != nil {
				t.Fatalf("server's frame: %v", err)
			}
			if fr.Type == frame.TypeGoAway {
				return fr.Code()
			}
			b = b[n:]
		}
	}
}
