package mux_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/wsmux/wsmux/mux"
)

// A server for many quiet sessions: every session's connection is served
// by the event loop (Config.Driver), and Config.Handler takes the streams
// the clients open, so a session waiting for its next stream holds no
// goroutine at all, neither the driver's nor an accept loop's. Only a
// stream being served has one (here, its echo). The same Config goes to
// every Upgrade: sessions started with equal Configs share one copy.
// Sessions over TLS, and on systems other than Linux, fall back to
// DriverFastPaths. Server and NewSession take the same Config for
// connections upgraded elsewhere.
func Example_eventLoop() {
	cfg := &mux.Config{
		Driver: mux.DriverEventLoop,
		Handler: func(st *mux.Stream) error {
			go func() {
				_, _ = io.Copy(st, st) // echo until the client's FIN
				_ = st.Close()
			}()
			return nil // accept the stream
		},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The session outlives this handler: the event loop serves it
		// until either side closes it.
		_, _ = mux.Upgrade(w, r, cfg)
	}))
	defer srv.Close()

	ctx := context.Background()
	sess, err := mux.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), &mux.Config{Driver: mux.DriverEventLoop})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	st, err := sess.Open(ctx, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = st.Write([]byte("woken up"))
	_ = st.CloseWrite()
	reply, _ := io.ReadAll(st)
	fmt.Println(string(reply))
	// Output: woken up
}
