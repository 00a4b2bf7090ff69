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

// A server that upgrades requests and echoes every stream, and a client
// that opens one stream, half-closes it and reads the echo.
func Example() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sess, err := mux.Upgrade(w, r, nil)
		if err != nil {
			return // the client got an HTTP error
		}
		go func() {
			defer sess.Close()
			for {
				st, err := sess.AcceptStream(context.Background())
				if err != nil {
					return
				}
				go func() {
					_, _ = io.Copy(st, st) // echo until the client's FIN
					_ = st.Close()         // then half-close our side
				}()
			}
		}()
	}))
	defer srv.Close()

	ctx := context.Background()
	sess, err := mux.Dial(ctx, "ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sess.Close()
	st, err := sess.Open(ctx, http.Header{"Streamtype": {"data"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	_, _ = st.Write([]byte("hello, wsmux"))
	_ = st.CloseWrite()
	reply, _ := io.ReadAll(st)
	fmt.Println(string(reply))
	// Output: hello, wsmux
}
