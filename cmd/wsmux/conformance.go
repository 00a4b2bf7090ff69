package main

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/gobwas/ws"
	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/conformance"
	"github.com/wsmux/wsmux/gateway/tunnel"
)

func init() { extraCommands = append(extraCommands, newConformanceCmd) }

// newConformanceCmd is `wsmux conformance`: the WSMUX/1 conformance runner.
func newConformanceCmd() *cobra.Command {
	var (
		cf            clientFlags
		listen        string
		headers       []string
		echo, slow    bool
		run           string
		timeout       time.Duration
		acceptTimeout time.Duration
	)
	c := &cobra.Command{
		Use:   "conformance (--server URL --token-file FILE | --listen ADDR)",
		Short: "Run the WSMUX/1 conformance checks against a server or a client",
		Long: `Play the scripted conversations of testdata/vectors/conversations.json (built
into the binary) against any WSMUX/1 endpoint over raw WebSocket connections, one
connection per check, and print one line per check: PASS, FAIL or SKIP, the section
of docs/spec/wsmux-v1.md it tests, its name and rule; then a summary. The exit
status is 1 if any check failed.

--server URL runs as a client against a server; URL and credentials take the same
forms as 'wsmux tunnel forward' (http://, https://, ws://, wss://; an empty path
means /tunnel, so the URL of a 'wsmux tunnel serve' works as it is).

--listen ADDR runs as a server: the client under test must connect to ADDR
(any path) and connect again each time a session ends, once per check.

Checks of normal stream behaviour (data, half-close, credit, STOP_SENDING,
drain) need an application that echoes every stream the runner opens,
half-closes after the runner's FIN and, once the runner stopped reading a
stream (STOP_SENDING), keeps reading it until that FIN: say so with --echo, and
give the header the streams need with --header (for 'wsmux tunnel serve',
'Target: HOST:PORT' of an allowed echo service, docs/spec/wsmux-tunnel-v1.md).
Checks that wait for a peer's timers (up to a minute each) run with --slow.

Then the checks of the resumption extension (docs/spec/wsmux-resume-v1.md,
sections R1..R11): whether the server negotiates RESUME and gives a resume
token, that an unknown token gets 404 and a received count out of range 409,
and (with --echo) that a session resumes after the runner resets its TCP
connection mid-transfer, every byte echoed once. A client (--listen) is
checked from the other side: that it offers RESUME and (with --echo) that,
after the runner, resuming as a server, resets the connection mid-transfer,
it comes back with its token and echoes every byte once. A peer that does
not negotiate RESUME gets SKIP for them.`,
		Example: `  wsmux conformance --server http://127.0.0.1:8080 --token-file token --echo --header 'Target: 127.0.0.1:7'
  wsmux conformance --listen 127.0.0.1:9443 --echo`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if (cf.server == "") == (listen == "") {
				return usageErrorf("give exactly one of --server and --listen")
			}
			o := conformance.Options{Echo: echo, Slow: slow, Timeout: timeout, AcceptTimeout: acceptTimeout, Out: cmd.OutOrStdout()}
			if run != "" {
				re, err := regexp.Compile(run)
				if err != nil {
					return usageErrorf("--run: %v", err)
				}
				o.Run = re
			}
			o.StreamHeader = http.Header{}
			for _, h := range headers {
				name, value, ok := strings.Cut(h, ":")
				if !ok || strings.TrimSpace(name) == "" {
					return usageErrorf("--header %q: want 'Name: value'", h)
				}
				o.StreamHeader.Add(strings.TrimSpace(name), strings.TrimSpace(value))
			}
			if cf.server != "" {
				token, tlsCfg, err := cf.load()
				if err != nil {
					return err
				}
				u, err := tunnel.WebSocketURL(cf.server, tunnel.DefaultPath)
				if err != nil {
					return usageErrorf("%v", err)
				}
				o.URL, o.TLS, o.Header = u, tlsCfg, http.Header{}
				if token != "" {
					o.Header.Set("Authorization", "Bearer "+token)
				}
			} else {
				ln, err := net.Listen("tcp", listen)
				if err != nil {
					return err
				}
				defer ln.Close()
				o.Listener = ln
				fmt.Fprintf(cmd.ErrOrStderr(), "conformance: listening on %s\n", ln.Addr())
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			sum, err := conformance.Run(ctx, o)
			var se ws.StatusError
			if errors.As(err, &se) && (se == 401 || se == 403) {
				return authError(err)
			}
			if err != nil {
				return err
			}
			if sum.Fail > 0 {
				return fmt.Errorf("conformance: %d of %d checks failed", sum.Fail, sum.Pass+sum.Fail+sum.Skip)
			}
			return nil
		},
	}
	cf.register(c)
	fl := c.Flags()
	fl.StringVar(&listen, "listen", "", "run as a server on ADDR (HOST:PORT) for a client under test")
	fl.StringArrayVar(&headers, "header", nil, "header of the streams the runner opens, 'Name: value' (repeatable)")
	fl.BoolVar(&echo, "echo", false, "the peer's application echoes every stream the runner opens (enables the data checks)")
	fl.BoolVar(&slow, "slow", false, "also run the checks that wait for the peer's timers (up to a minute each)")
	fl.StringVar(&run, "run", "", "run only the checks whose name matches this regular expression")
	fl.DurationVar(&timeout, "timeout", 10*time.Second, "time limit of each check")
	fl.DurationVar(&acceptTimeout, "accept-timeout", 30*time.Second, "with --listen: how long to wait for the client's next connection")
	return c
}
