package mux_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/wsmux/wsmux/mux"
)

// A resumable session survives a dropped connection: the client redials
// on its own, both sides replay what the other did not receive, and the
// stream goes on as if nothing happened. Here the client's first
// connection is closed under the session between two echoes.
func Example_resume() {
	reg := &mux.ResumeRegistry{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := mux.Upgrade(w, r, &mux.Config{Resume: true, ResumeRegistry: reg})
		if err != nil {
			return // a resume request is handed to its session: no new one
		}
		go func() {
			defer sess.Close()
			for {
				st, err := sess.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go func() { _, _ = io.Copy(st, st); _ = st.Close() }()
			}
		}()
	}))
	defer srv.Close()

	// Keep the client's connections, to cut the first one.
	var mu sync.Mutex
	var conns []net.Conn
	d := mux.Dialer{
		Config: &mux.Config{Resume: true},
		NetDial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			return c, err
		},
	}
	ctx := context.Background()
	sess, err := d.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"))
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
	echo := bufio.NewReader(st)
	for _, line := range []string{"before the cut\n", "after the cut\n"} {
		if line == "after the cut\n" {
			mu.Lock()
			_ = conns[0].Close() // the network drops the connection
			mu.Unlock()
		}
		_, _ = io.WriteString(st, line)
		reply, err := echo.ReadString('\n')
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Print(reply)
	}
	fmt.Println("resumes:", sess.Stats().Resumes)
	// Output:
	// before the cut
	// after the cut
	// resumes: 1
}
