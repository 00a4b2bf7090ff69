package gateway

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gobwas/ws"
	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsmux/wsmux/cmd/wsmux/internal/testnet"
)

// TestV5FragmentedStdin: a v5.channel.k8s.io client whose stdin messages
// travel in many frames (gorilla/websocket with a 1 KiB write buffer splits
// each 64 KiB message in about 64, as browsers split large messages), with
// PINGs between the fragments, gets every byte to `cat` and back. Before
// the gateway joined fragments, wsstream took each frame for a message and
// dropped the continuations: stdout came back short and the exec never
// ended.
func TestV5FragmentedStdin(t *testing.T) {
	var logs testnet.Buffer
	_, srv := startChannelGateway(t, &logs)
	q := url.Values{"command": {"cat"}, "stdin": {"true"}, "stdout": {"true"}}
	u := "ws" + strings.TrimPrefix(srv.URL, "http") + "/api/v1/namespaces/a/pods/web-0/exec?" + q.Encode()
	d := websocket.Dialer{Subprotocols: []string{v5Protocol}, HandshakeTimeout: 10 * time.Second, WriteBufferSize: 1024}
	c, resp, err := d.Dial(u, http.Header{"Authorization": {"Bearer alice-token"}})
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(60 * time.Second))

	const messages, size = 8, 64 << 10
	sent := sha256.New()
	writing := make(chan error, 1)
	go func() {
		writing <- func() error {
			for i := range messages {
				data := bytes.Repeat([]byte{byte('a' + i)}, size) // a continuation's first byte is no channel
				sent.Write(data)
				w, err := c.NextWriter(websocket.BinaryMessage)
				if err != nil {
					return err
				}
				if _, err := w.Write(append([]byte{chanStdin}, data[:size/2]...)); err != nil {
					return err
				}
				// The first half is on the wire in frames: a PING comes between fragments.
				if err := c.WriteControl(websocket.PingMessage, []byte("mid"), time.Now().Add(10*time.Second)); err != nil {
					return err
				}
				if _, err := w.Write(data[size/2:]); err != nil {
					return err
				}
				if err := w.Close(); err != nil {
					return err
				}
			}
			return c.WriteMessage(websocket.BinaryMessage, []byte{255, chanStdin}) // v5: close stdin
		}()
	}()

	got := sha256.New()
	var n int
	var status []byte
	for {
		_, m, err := c.ReadMessage()
		if err != nil {
			break // the gateway closes after the status
		}
		switch {
		case len(m) == 0:
		case m[0] == chanStdout:
			got.Write(m[1:])
			n += len(m) - 1
		case m[0] == chanError:
			status = append(status, m[1:]...)
		}
	}
	if err := <-writing; err != nil {
		t.Fatalf("writing stdin: %v", err)
	}
	if n != messages*size || !bytes.Equal(got.Sum(nil), sent.Sum(nil)) {
		t.Fatalf("stdout: %d bytes (want %d), sha256 equal %v", n, messages*size, bytes.Equal(got.Sum(nil), sent.Sum(nil)))
	}
	var st metav1.Status
	if err := json.Unmarshal(status, &st); err != nil || st.Status != metav1.StatusSuccess {
		t.Errorf("status %q (%v), want Success", status, err)
	}
}

// frameBytes encodes frames as a client sends them (masked).
func frameBytes(t *testing.T, frames ...ws.Frame) []byte {
	t.Helper()
	var b bytes.Buffer
	for _, f := range frames {
		f.Payload = bytes.Clone(f.Payload)
		if err := ws.WriteFrame(&b, ws.MaskFrameInPlace(f)); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// readFrames decodes what a joinConn hands out, unmasked, until its error.
func readFrames(jc *joinConn) ([]ws.Frame, error) {
	r := bufio.NewReader(jc)
	var fs []ws.Frame
	for {
		f, err := ws.ReadFrame(r)
		if err != nil {
			return fs, err
		}
		if f.Header.Masked {
			ws.Cipher(f.Payload, f.Header.Mask, 0)
		}
		f.Header.Masked, f.Header.Mask = false, [4]byte{}
		fs = append(fs, f)
	}
}

func TestJoinConn(t *testing.T) {
	bin := func(fin bool, p string) ws.Frame { return ws.NewFrame(ws.OpBinary, fin, []byte(p)) }
	cont := func(fin bool, p string) ws.Frame { return ws.NewFrame(ws.OpContinuation, fin, []byte(p)) }
	ping := ws.NewPingFrame([]byte("p"))
	var overLimit bytes.Buffer // a continuation that would take the message past maxJoined
	ws.WriteHeader(&overLimit, ws.Header{OpCode: ws.OpContinuation, Length: maxJoined, Masked: true})
	for _, tc := range []struct {
		name string
		in   []byte
		want []ws.Frame
		err  error // nil: io.EOF after want
	}{
		{"whole messages pass", frameBytes(t, bin(true, "ab"), ping, bin(true, "")), []ws.Frame{bin(true, "ab"), ping, bin(true, "")}, nil},
		{"fragments joined", frameBytes(t, bin(false, "ab"), ping, cont(false, ""), cont(false, "cd"), cont(true, "e"), bin(true, "f")),
			[]ws.Frame{ping, bin(true, "abcde"), bin(true, "f")}, nil},
		{"text fragments keep their opcode", frameBytes(t, ws.NewFrame(ws.OpText, false, []byte("x")), cont(true, "y")),
			[]ws.Frame{ws.NewFrame(ws.OpText, true, []byte("xy"))}, nil},
		{"continuation alone", frameBytes(t, bin(true, "a"), cont(true, "b")), []ws.Frame{bin(true, "a")}, &errJoin{}},
		{"new message among fragments", frameBytes(t, bin(false, "a"), bin(true, "b")), nil, &errJoin{}},
		{"over the limit", append(frameBytes(t, bin(false, "a")), overLimit.Bytes()...), nil, &errJoin{}},
		{"cut inside fragments", frameBytes(t, bin(false, "ab")), nil, io.ErrUnexpectedEOF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jc := &joinConn{src: bufio.NewReader(bytes.NewReader(tc.in))}
			fs, err := readFrames(jc)
			want := tc.err
			if want == nil {
				want = io.EOF
			}
			var je *errJoin
			if _, isJoin := want.(*errJoin); isJoin && !errors.As(err, &je) || !isJoin && !errors.Is(err, want) {
				t.Errorf("error %v, want %T %v", err, want, want)
			}
			if len(fs) != len(tc.want) {
				t.Fatalf("%d frames, want %d", len(fs), len(tc.want))
			}
			for i, f := range fs {
				w := tc.want[i]
				if f.Header.OpCode != w.Header.OpCode || f.Header.Fin != w.Header.Fin || !bytes.Equal(f.Payload, w.Payload) {
					t.Errorf("frame %d: %v fin=%v %q, want %v fin=%v %q", i, f.Header.OpCode, f.Header.Fin, f.Payload, w.Header.OpCode, w.Header.Fin, w.Payload)
				}
			}
		})
	}
}
