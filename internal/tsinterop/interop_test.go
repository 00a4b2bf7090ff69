package tsinterop_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/internal/tsinterop"
	"github.com/wsmux/wsmux/mux"
)

// pattern is the byte stream of interop stream k (clients/ts/test/tools/pattern.ts).
func pattern(k, size int) []byte {
	b := make([]byte, size)
	for i := range b {
		b[i] = byte(i%251 + 7*k)
	}
	return b
}

type observed struct {
	mu       sync.Mutex
	data     map[int]string // stream -> "" when sha256 and EOF were right, else what went wrong
	reset    error          // what Read returned on the reset stream
	before   string         // bytes read before the reset
	stopSent bool
}

// TestTSClientIntegrity: the TS client opens 64 streams against a Go mux
// server and sends 4 MiB on each while the server sends 4 MiB back (256 KiB
// under -race; make test runs it again without); both
// sides check sha256. The server observes each half-close as io.EOF right
// after the bytes, a reset with the client's code, and a STOP_SENDING that
// fails the client's writer.
func TestTSClientIntegrity(t *testing.T) {
	node, script := tsinterop.NeedCompiled(t, "interop")
	streams, size := 64, 4<<20
	if raceEnabled {
		size = 256 << 10
	}
	cfg := mux.DefaultConfig()
	obs := &observed{data: map[int]string{}}
	var wg sync.WaitGroup
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := mux.Upgrade(w, r, cfg)
		if err != nil {
			t.Errorf("upgrade: %v", err)
			return
		}
		defer sess.Close()
		for {
			st, err := sess.AcceptStream(context.Background())
			if err != nil {
				return
			}
			wg.Go(func() { serveStream(t, st, obs, size) })
		}
	}))
	defer hs.Close()

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, script, "ws"+strings.TrimPrefix(hs.URL, "http")+"/", strconv.Itoa(streams), strconv.Itoa(size))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	wg.Wait()
	var res struct {
		OK       bool    `json:"ok"`
		MiBps    string  `json:"mibps"`
		StopCode int     `json:"stopCode"`
		RTT      float64 `json:"rttMs"`
		Error    string  `json:"error"`
		Failed   []any   `json:"failed"`
	}
	if jerr := json.Unmarshal(bytes.TrimSpace(out), &res); jerr != nil || err != nil || !res.OK {
		t.Fatalf("node: %v; output %s; stderr %s", err, out, stderr.String())
	}
	t.Logf("TS client: %d streams x %d bytes each way, %s MiB/s, PING RTT %.2f ms", streams, size, res.MiBps, res.RTT)

	obs.mu.Lock()
	defer obs.mu.Unlock()
	if len(obs.data) != streams {
		t.Fatalf("server saw %d data streams, want %d", len(obs.data), streams)
	}
	for k, why := range obs.data {
		if why != "" {
			t.Errorf("stream %d: %s", k, why)
		}
	}
	var se *mux.StreamError
	if !errors.As(obs.reset, &se) || se.Code != 0x1234 || !se.Remote {
		t.Errorf("reset stream: Read returned %v, want a remote reset with code 0x1234", obs.reset)
	}
	if obs.before != "before-reset" {
		t.Errorf("reset stream: read %q before the reset, want the bytes written before it", obs.before)
	}
	if !obs.stopSent || res.StopCode != int(frame.Cancel) {
		t.Errorf("STOP_SENDING: sent %v, the TS writer failed with code %d, want %d", obs.stopSent, res.StopCode, frame.Cancel)
	}
}

func serveStream(t *testing.T, st *mux.Stream, obs *observed, size int) {
	switch st.Headers().Get("X-Interop") {
	case "data":
		k, _ := strconv.Atoi(st.Headers().Get("X-Stream"))
		done := make(chan error, 1)
		go func() {
			_, err := st.Write(pattern(k, size))
			if err == nil {
				err = st.CloseWrite()
			}
			done <- err
		}()
		h := sha256.New()
		n, err := io.Copy(h, st) // io.EOF (the client's FIN) ends it with a nil error
		why := ""
		switch {
		case err != nil:
			why = "read: " + err.Error()
		case n != int64(size):
			why = "read " + strconv.FormatInt(n, 10) + " bytes before EOF"
		case !bytes.Equal(h.Sum(nil), sha256Of(pattern(k, size))):
			why = "sha256 mismatch"
		}
		if err := <-done; err != nil && why == "" {
			why = "write: " + err.Error()
		}
		obs.mu.Lock()
		obs.data[k] = why
		obs.mu.Unlock()
	case "reset":
		var got []byte
		buf := make([]byte, 64)
		var err error
		for {
			var n int
			n, err = st.Read(buf)
			got = append(got, buf[:n]...)
			if err != nil {
				break
			}
		}
		obs.mu.Lock()
		obs.reset, obs.before = err, string(got)
		obs.mu.Unlock()
	case "stop":
		err := st.CloseRead()
		obs.mu.Lock()
		obs.stopSent = err == nil
		obs.mu.Unlock()
		_ = st.CloseWrite()
	default:
		t.Errorf("unexpected stream headers %v", st.Headers())
		_ = st.Reset(frame.Cancel)
	}
}

func sha256Of(b []byte) []byte { s := sha256.Sum256(b); return s[:] }
