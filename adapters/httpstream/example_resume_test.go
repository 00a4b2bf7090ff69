package httpstream_test

import (
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"time"

	spdy "github.com/wsmux/wsmux/adapters/httpstream"
	"github.com/wsmux/wsmux/mux"

	"k8s.io/client-go/tools/remotecommand"
	k8shttpstream "k8s.io/streaming/pkg/httpstream"
)

// Session resumption for client-go users: the client's RoundTripper sets
// Resume, the server's upgrader a mux.Config with Resume and a
// ResumeRegistry. A dropped connection then suspends the session and the
// round tripper redials with its resume token: the exec goes on where it
// stopped. OnResumeEvent is where a program logs the drops and resumes.
func ExampleRoundTripperConfig_resume() {
	reg := &mux.ResumeRegistry{
		// Bind each session to the caller that opened it.
		Identity: func(r *http.Request) string { return r.Header.Get("Authorization") },
	}
	up := spdy.NewResponseUpgraderWithConfig(&mux.Config{Resume: true, ResumeRegistry: reg})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(mux.HeaderResumeToken) == "" {
			if _, err := k8shttpstream.Handshake(r, w, []string{"v4.channel.k8s.io"}); err != nil {
				return
			}
		}
		streams := make(chan k8shttpstream.Stream, 4)
		conn := up.UpgradeResponse(w, r, func(s k8shttpstream.Stream, replySent <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			return // a failed upgrade, or a resume (served by the registry)
		}
		defer conn.Close()
		var stdout, errStream k8shttpstream.Stream
		for stdout == nil || errStream == nil {
			s := <-streams
			switch s.Headers().Get("streamType") {
			case "stdout":
				stdout = s
			case "error":
				errStream = s
			}
		}
		fmt.Fprintln(stdout, "hello from a resumable session")
		stdout.Close()
		errStream.Close()
	}))
	defer srv.Close()

	rt, err := spdy.NewRoundTripperWithConfig(spdy.RoundTripperConfig{
		Resume:        true,
		ResumeTimeout: time.Minute,
		OnResumeEvent: func(e spdy.ResumeEvent) { log.Printf("exec: connection %s (attempt %d)", e.Kind, e.Attempt) },
	})
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
	// Output: hello from a resumable session
}
