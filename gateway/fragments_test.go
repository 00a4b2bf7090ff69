package gateway

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/wsmux/wsmux/internal/testnet"
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
