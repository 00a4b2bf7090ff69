package httpstream_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	// The migration: this import replaces
	//   spdy "k8s.io/apimachinery/pkg/util/httpstream/spdy"
	// and nothing else changes.
	spdy "github.com/wsmux/wsmux/adapters/httpstream"

	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/tools/remotecommand"
)

// A client-go exec and a server using the same upgrader API as the SPDY
// package, over wsmux.
func Example() {
	// Server: the code of a SPDY streaming server, unchanged.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proto, err := httpstream.Handshake(r, w, []string{"v4.channel.k8s.io"})
		if err != nil {
			return
		}
		streams := make(chan httpstream.Stream, 4)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, replySent <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			return
		}
		defer conn.Close()
		var stdout, errStream httpstream.Stream
		for stdout == nil || errStream == nil {
			s := <-streams
			switch s.Headers().Get("streamType") {
			case "stdout":
				stdout = s
			case "error":
				errStream = s
			}
		}
		fmt.Fprintf(stdout, "hello over %s\n", proto)
		stdout.Close()
		errStream.Close() // no error: exit code 0
	}))
	defer srv.Close()

	// Client: client-go's executor with the wsmux round tripper.
	rt, err := spdy.NewRoundTripper(nil)
	if err != nil {
		panic(err)
	}
	u, _ := url.Parse(srv.URL + "/exec")
	exec, err := remotecommand.NewSPDYExecutorForTransports(rt, rt, "POST", u)
	if err != nil {
		panic(err)
	}
	var out strings.Builder
	if err := exec.Stream(remotecommand.StreamOptions{Stdout: &out}); err != nil {
		panic(err)
	}
	fmt.Print(out.String())
	// Output: hello over v4.channel.k8s.io
}
