package mux_test

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gobwas/ws/wsutil"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/mux"
)

// Session-level use of the language-neutral vectors of testdata/vectors
// (the scripted conversations run in conformance's tests):
// every invalid frame and message ends a real session with the code the
// vector names, the WebSocket close of the spec's section 10.2 follows, and
// every valid header block reaches the application as the vector says.

type sessionVector struct {
	Name      string              `json:"name"`
	Hex       string              `json:"hex"`
	Error     string              `json:"error"`
	Code      uint32              `json:"code"`
	Rule      string              `json:"rule"`
	Frames    int                 `json:"frames"`
	Canonical map[string][]string `json:"canonical"`
}

type sessionVectors struct {
	Invalid  []sessionVector `json:"invalid"`
	Messages []sessionVector `json:"messages"`
	Valid    []sessionVector `json:"valid"`
}

func loadSessionVectors(t *testing.T, name string) sessionVectors {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", "vectors", name))
	if err != nil {
		t.Fatal(err)
	}
	var v sessionVectors
	if err := json.Unmarshal(b, &v); err != nil { // the frame tests check every field
		t.Fatal(err)
	}
	return v
}

// closeStatus is the WebSocket close status of the spec's section 10.2.
func closeStatus(code frame.ErrorCode) ws.StatusCode {
	switch code {
	case frame.NoError, frame.IdleTimeout:
		return ws.StatusNormalClosure
	case frame.KeepaliveTimeout, frame.SettingsTimeout, frame.StallTimeout:
		return ws.StatusGoingAway
	case frame.EnhanceYourCalm, frame.StreamLimit, frame.HeaderTooLarge, frame.MemoryLimit:
		return ws.StatusPolicyViolation
	case frame.InternalError:
		return ws.StatusInternalServerError
	}
	return ws.StatusProtocolError
}

// vectorServer upgrades every request and sends the headers of every
// stream the client opens to the returned channel.
func vectorServer(t *testing.T) (string, <-chan http.Header) {
	t.Helper()
	hdrs := make(chan http.Header, 64)
	// hs.Close does not wait for handlers whose connection was hijacked
	// (upgraded): a session upgraded after the cleanup began is closed at
	// once rather than added to wg while it is waited for (a WaitGroup
	// misuse the race detector reported).
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed bool
	)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := mux.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		if closed {
			mu.Unlock()
			sess.Close()
			return
		}
		defer mu.Unlock()
		wg.Go(func() {
			defer sess.Close()
			for {
				st, err := sess.AcceptStream(context.Background())
				if err != nil {
					return
				}
				select {
				case hdrs <- st.Headers():
				default:
				}
			}
		})
	}))
	t.Cleanup(func() {
		hs.Close()
		mu.Lock()
		closed = true
		mu.Unlock()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(hs.URL, "http"), hdrs
}

// rawClient is a raw WebSocket client of a mux server.
type rawClient struct {
	conn net.Conn
	r    io.Reader
}

func dialRaw(t *testing.T, url string, preface bool) *rawClient {
	t.Helper()
	d := ws.Dialer{Protocols: []string{mux.Subprotocol}}
	conn, br, _, err := d.Dial(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(time.Minute)) // a hang guard for the raw reads, no bound on the server
	c := &rawClient{conn: conn, r: conn}
	if br != nil {
		c.r = io.MultiReader(br, conn)
	}
	if preface {
		var s frame.Settings
		c.send(t, frame.AppendSettings(nil, &s))
	}
	return c
}

func (c *rawClient) send(t *testing.T, msg []byte) {
	t.Helper()
	if err := wsutil.WriteClientBinary(c.conn, msg); err != nil {
		t.Fatal(err)
	}
}

// end reads until the session ends and returns the GOAWAY received (nil
// if none), whether a PING ACK with opaque came, and the close status.
func (c *rawClient) end(t *testing.T, opaque uint32) (goaway *frame.Header, acked bool, status ws.StatusCode) {
	t.Helper()
	rw := struct {
		io.Reader
		io.Writer
	}{bufio.NewReader(c.r), c.conn}
	for {
		msg, _, err := wsutil.ReadServerData(rw)
		var ce wsutil.ClosedError
		if errors.As(err, &ce) {
			return goaway, acked, ce.Code
		}
		if err != nil {
			t.Fatalf("read: %v (GOAWAY %v)", err, goaway)
		}
		var it frame.Iterator
		it.Reset(msg, frame.DefaultLimits())
		for it.Next() {
			f := it.Frame()
			switch {
			case f.Type == frame.TypeGoAway:
				h := f.Header
				goaway = &h
			case f.Type == frame.TypePing && f.Flags.Has(frame.FlagACK) && f.Arg == opaque:
				return goaway, true, 0
			}
		}
	}
}

const barrier = 0x7e57

func TestVectorsEndSessions(t *testing.T) {
	url, _ := vectorServer(t)
	vs := loadSessionVectors(t, "frames.json")
	all := append(vs.Invalid, vs.Messages...)
	for _, v := range all {
		t.Run(v.Name, func(t *testing.T) {
			b, err := hex.DecodeString(v.Hex)
			if err != nil {
				t.Fatal(err)
			}
			// A SETTINGS vector is sent as the first frame, as SETTINGS must be.
			first := len(b) >= frame.HeaderSize && frame.Type(b[0]) == frame.TypeSettings
			c := dialRaw(t, url, !first)
			c.send(t, b)
			c.send(t, frame.AppendPing(nil, false, barrier))
			goaway, acked, status := c.end(t, barrier)
			if v.Error == "" {
				if !acked || goaway != nil {
					t.Fatalf("a valid message ended the session (GOAWAY %v, close %d)", goaway, status)
				}
				return
			}
			switch {
			case acked:
				t.Fatalf("the session survived %s (%s)", v.Name, v.Rule)
			case goaway == nil:
				t.Fatalf("no GOAWAY before close %d, want %s", status, v.Error)
			case uint32(goaway.Code()) != v.Code:
				t.Fatalf("GOAWAY %s, want %s (%s)", goaway.Code(), v.Error, v.Rule)
			case status != closeStatus(goaway.Code()):
				t.Fatalf("close %d after GOAWAY %s, want %d", status, goaway.Code(), closeStatus(goaway.Code()))
			}
		})
	}
}

func TestVectorsHeaderBlocksInSessions(t *testing.T) {
	url, hdrs := vectorServer(t)
	vs := loadSessionVectors(t, "headers.json")
	for _, v := range vs.Invalid {
		t.Run(v.Name, func(t *testing.T) {
			block, _ := hex.DecodeString(v.Hex)
			msg, err := frame.AppendHeadersBlock(nil, 1, frame.FlagSYN, block)
			if err != nil {
				msg = frame.AppendHeader(nil, frame.Header{Type: frame.TypeHeaders, Flags: frame.FlagSYN, Length: uint16(len(block)), StreamID: 1})
				msg = append(msg, block...)
			}
			c := dialRaw(t, url, true)
			c.send(t, msg)
			c.send(t, frame.AppendPing(nil, false, barrier))
			goaway, acked, status := c.end(t, barrier)
			if acked || goaway == nil || uint32(goaway.Code()) != v.Code || status != closeStatus(goaway.Code()) {
				t.Fatalf("GOAWAY %v, survived %v, close %d; want %s (%s)", goaway, acked, status, v.Error, v.Rule)
			}
		})
	}
	for _, v := range vs.Valid {
		if v.Canonical == nil {
			continue
		}
		t.Run(v.Name, func(t *testing.T) {
			block, _ := hex.DecodeString(v.Hex)
			msg, err := frame.AppendHeadersBlock(nil, 1, frame.FlagSYN|frame.FlagFIN, block)
			if err != nil {
				t.Fatal(err)
			}
			c := dialRaw(t, url, true)
			c.send(t, msg)
			h := <-hdrs // the stream is accepted (a hang otherwise)
			if !reflect.DeepEqual(map[string][]string(h), v.Canonical) {
				t.Fatalf("headers %v, want %v", h, v.Canonical)
			}
		})
	}
}
