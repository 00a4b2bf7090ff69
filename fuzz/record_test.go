package fuzz

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/wsmux/wsmux/internal/testkit/require"

	"github.com/wsmux/wsmux/frame"
	"github.com/wsmux/wsmux/fuzz/wsref"
	"github.com/wsmux/wsmux/mux"
)

var update = flag.Bool("update", false, "rewrite the recorded-session seed corpora and the hand-written seed files")

// tapConn records every byte written to it.
type tapConn struct {
	net.Conn
	mu  sync.Mutex
	out bytes.Buffer
}

func (c *tapConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.out.Write(p)
	c.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *tapConn) bytes() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.out.Bytes())
}

// recording is what each side of a real session wrote.
type recording struct {
	name           string
	client, server []byte
}

// recordExec records an exec-like conversation (kubectl exec -i -t): the
// client opens the error, stdin, stdout, stderr and resize streams with
// Kubernetes headers, types a command and a terminal size; the server
// answers on stdout and stderr, writes the exit status on the error stream
// and closes the connection, as the kubelet does.
func recordExec(t *testing.T) recording {
	var rec recording
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		ta, tb := &tapConn{Conn: a}, &tapConn{Conn: b}
		cli, err := mux.Client(ta, nil)
		require.NoError(t, err)
		srv, err := mux.Server(tb, nil)
		require.NoError(t, err)
		kinds := []string{"error", "stdin", "stdout", "stderr", "resize"}
		go func() {
			streams := map[string]*mux.Stream{}
			for range kinds {
				st, err := srv.AcceptStream(context.Background())
				if err != nil {
					return
				}
				streams[st.Headers().Get("Streamtype")] = st
			}
			in, _ := io.ReadAll(streams["stdin"])
			size := make([]byte, 64)
			n, _ := streams["resize"].Read(size)
			_, _ = fmt.Fprintf(streams["stdout"], "ran %q in a %s terminal\n", in, size[:n])
			_, _ = streams["stderr"].Write([]byte("warning: no tty\n"))
			_ = streams["stdout"].Close()
			_ = streams["stderr"].Close()
			_, _ = streams["error"].Write([]byte(`{"metadata":{},"status":"Success"}`))
			_ = streams["error"].Close()
			_ = srv.Close()
		}()
		streams := map[string]*mux.Stream{}
		for _, k := range kinds {
			h := http.Header{"Streamtype": {k}, "X-Stream-Protocol-Version": {"v5.channel.k8s.io"}}
			st, err := cli.Open(context.Background(), h)
			require.NoError(t, err)
			streams[k] = st
		}
		streams["stdin"].SetInteractive(true)
		_, err = streams["stdin"].Write([]byte("ls -l /\n"))
		require.NoError(t, err)
		require.NoError(t, streams["stdin"].Close())
		_, err = streams["resize"].Write([]byte(`{"Width":80,"Height":24}`))
		require.NoError(t, err)
		out, err := io.ReadAll(streams["stdout"])
		require.NoError(t, err)
		require.Contains(t, string(out), "ls -l")
		status, _ := io.ReadAll(streams["error"])
		require.Contains(t, string(status), "Success")
		<-cli.CloseChan()
		_ = cli.Close()
		<-srv.Done()
		rec = recording{"exec", ta.bytes(), tb.bytes()}
	})
	return rec
}

// recordPortForward records a port-forward-like conversation: an error and
// a data stream per request with port and requestID headers, an HTTP
// request through the tunnel and its answer; the client then closes.
func recordPortForward(t *testing.T) recording {
	var rec recording
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		ta, tb := &tapConn{Conn: a}, &tapConn{Conn: b}
		cli, err := mux.Client(ta, nil)
		require.NoError(t, err)
		srv, err := mux.Server(tb, nil)
		require.NoError(t, err)
		go func() {
			for {
				st, err := srv.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go func() {
					if st.Headers().Get("Streamtype") != "data" {
						_, _ = io.Copy(io.Discard, st)
						_ = st.Close()
						return
					}
					req := make([]byte, 256)
					n, _ := st.Read(req)
					if bytes.HasPrefix(req[:n], []byte("GET ")) {
						_, _ = st.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
					}
					_ = st.Close()
				}()
			}
		}()
		for id := range 2 {
			base := http.Header{"Port": {"8080"}, "Requestid": {fmt.Sprint(id)}}
			eh, dh := base.Clone(), base.Clone()
			eh.Set("Streamtype", "error")
			dh.Set("Streamtype", "data")
			es, err := cli.Open(context.Background(), eh)
			require.NoError(t, err)
			ds, err := cli.Open(context.Background(), dh)
			require.NoError(t, err)
			_, err = ds.Write([]byte("GET / HTTP/1.1\r\nHost: localhost:8080\r\n\r\n"))
			require.NoError(t, err)
			resp, err := io.ReadAll(ds)
			require.NoError(t, err)
			require.Contains(t, string(resp), "hello")
			require.NoError(t, ds.Close())
			require.NoError(t, es.Close())
			_, _ = io.ReadAll(es)
		}
		_ = cli.Close()
		<-srv.Done()
		rec = recording{"portforward", ta.bytes(), tb.bytes()}
	})
	return rec
}

// sessionScriptOf turns the messages of a recorded wire into a FuzzSession
// script for the other role: each message one op, then a close. opens is
// how many streams the session under test opens first (the streams the
// recorded peer answers).
func sessionScriptOf(t *testing.T, wire []byte, fromClient bool, opens int) []byte {
	r := wsref.Read(wire, fromClient, 1<<30)
	require.Contains(t, []error{io.EOF, wsref.ErrClose}, r.End.Err, "recorded wire: %s", r.End.Why)
	var flags byte
	if !fromClient {
		flags = 1 // the session under test is the client
	}
	s := newScript(flags, 0x2a)
	for range opens {
		s.op(opOpen, 0, 0)
	}
	if opens > 0 {
		s.wait(1, 0)
	}
	for _, m := range r.Messages {
		require.LessOrEqual(t, len(m), 0xffff)
		s.msg(1, m)
	}
	s.wait(100, 0)
	s.op(opControl|2<<3, 2, 0x03, 0xe8)
	return s.b
}

// coreSeedOf turns the frames after the SETTINGS of a recorded wire into a
// FuzzCore input: messages of at most 255 bytes ([0][len][bytes]), each
// followed by a batch ([1][0]) and a read ([2][0]).
func coreSeedOf(t *testing.T, wire []byte, fromClient bool) []byte {
	r := wsref.Read(wire, fromClient, 1<<30)
	var out, cur []byte
	flush := func() {
		if len(cur) > 0 {
			out = append(out, 0, byte(len(cur)))
			out = append(out, cur...)
			out = append(out, 1, 0, 2, 0)
			cur = nil
		}
	}
	lim := frame.DefaultLimits()
	for _, m := range r.Messages {
		var it frame.Iterator
		it.Reset(m, lim)
		for it.Next() {
			f := it.Frame()
			if f.Type == frame.TypeSettings {
				continue
			}
			raw := append(frame.AppendHeader(nil, f.Header), f.Payload...)
			if len(raw) > 255 {
				continue
			}
			if len(cur)+len(raw) > 255 {
				flush()
			}
			cur = append(cur, raw...)
		}
		flush()
	}
	return out
}

func writeSeed(t *testing.T, dir, name string, data []byte) {
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)), 0o644))
}

// TestRecordedSessions records the exec and port-forward conversations. With
// -update it writes them as seeds: FuzzSession scripts (both roles) here,
// raw wire for FuzzWebSocketFrame (mux/internal/wsio) and frames for
// FuzzCore (mux/internal/engine), and the hand-written seeds of FuzzSession and
// FuzzSessionPair as named files. Without -update it checks that the files
// exist.
func TestRecordedSessions(t *testing.T) {
	recs := []recording{recordExec(t), recordPortForward(t)}
	wsDir := filepath.Join("..", "mux", "internal", "wsio", "testdata", "fuzz", "FuzzWebSocketFrame")
	coreDir := filepath.Join("..", "mux", "internal", "engine", "testdata", "fuzz", "FuzzCore")
	sessDir := filepath.Join("testdata", "fuzz", "FuzzSession")
	pairDir := filepath.Join("testdata", "fuzz", "FuzzSessionPair")
	type file struct {
		dir, name string
		data      []byte
	}
	var files []file
	for _, r := range recs {
		require.NotEmpty(t, r.client)
		require.NotEmpty(t, r.server)
		files = append(files,
			file{sessDir, "recorded-" + r.name + "-client-to-server", sessionScriptOf(t, r.client, true, 0)},
			file{sessDir, "recorded-" + r.name + "-server-to-client", sessionScriptOf(t, r.server, false, countSyns(r.client))},
			file{wsDir, "recorded-" + r.name + "-client-to-server", append([]byte{0, 0}, r.client...)},
			file{wsDir, "recorded-" + r.name + "-server-to-client", append([]byte{1, 5}, r.server...)},
			file{coreDir, "recorded-" + r.name + "-client-to-server", coreSeedOf(t, r.client, true)},
		)
	}
	for _, s := range sessionSeeds() {
		if s.data != nil {
			files = append(files, file{sessDir, s.name, s.data})
		}
	}
	for _, s := range pairSeeds() {
		if s.data != nil {
			files = append(files, file{pairDir, s.name, s.data})
		}
	}
	for _, f := range files {
		path := filepath.Join(f.dir, f.name)
		if *update {
			writeSeed(t, f.dir, f.name, f.data)
			continue
		}
		_, err := os.Stat(path)
		require.NoError(t, err, "%s is missing: run go test ./fuzz/ -run TestRecordedSessions -update", path)
	}
}

// countSyns counts the streams a recorded client wire opens.
func countSyns(wire []byte) int {
	n := 0
	lim := frame.DefaultLimits()
	for _, m := range wsref.Read(wire, true, 1<<30).Messages {
		var it frame.Iterator
		it.Reset(m, lim)
		for it.Next() {
			if f := it.Frame(); f.Type == frame.TypeHeaders && f.Flags.Has(frame.FlagSYN) {
				n++
			}
		}
	}
	return n
}
