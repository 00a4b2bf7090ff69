package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/gateway/auth"
	"github.com/wsmux/wsmux/gateway/ops"
	"github.com/wsmux/wsmux/gateway/origin"
	"github.com/wsmux/wsmux/gateway/tunnel"
	"github.com/wsmux/wsmux/mux"
)

func newTunnelCmd(a *app) *cobra.Command {
	c := &cobra.Command{
		Use:   "tunnel",
		Short: "Forward plain TCP connections over one wsmux WebSocket",
		Long: `Forward plain TCP connections over one wsmux WebSocket; no Kubernetes needed.

'wsmux tunnel serve' accepts authenticated tunnel sessions and dials only the
allow-listed targets; 'wsmux tunnel forward' listens locally and opens one
stream per accepted connection. Half-closes are propagated both ways.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return usageErrorf("missing subcommand: serve or forward") },
	}
	c.AddCommand(newTunnelServeCmd(a), newTunnelForwardCmd(a))
	return c
}

// serverFlags are the listening flags of gateway and tunnel serve.
type serverFlags struct {
	listen          string
	tlsCert, tlsKey string
	tokenFile       string
	shutdownTimeout time.Duration
	pprof           bool
	allowedOrigins  []string
	maxConns        int
	idleTimeout     time.Duration
	readHeader      time.Duration
	// cert is the --tls-cert/--tls-key pair, loaded by validate.
	cert *tls.Certificate
	// origins is --allowed-origins, parsed by validate.
	origins *origin.Policy
}

func (f *serverFlags) register(c *cobra.Command, defListen string) {
	fl := c.Flags()
	fl.StringVar(&f.listen, "listen", defListen, "address to listen on (HOST:PORT)")
	fl.StringVar(&f.tlsCert, "tls-cert", "", "PEM certificate (chain) to serve HTTPS/WSS with; needs --tls-key")
	fl.StringVar(&f.tlsKey, "tls-key", "", "PEM private key of --tls-cert")
	fl.StringVar(&f.tokenFile, "token-file", "", "file of accepted bearer tokens, one per line (# comments allowed)")
	fl.DurationVar(&f.shutdownTimeout, "shutdown-timeout", 30*time.Second, "on SIGTERM/SIGINT: how long sessions may drain after GOAWAY before they are closed (a second signal closes them at once)")
	fl.BoolVar(&f.pprof, "pprof", false, "also serve Go's /debug/pprof/ profiles next to /metrics (no authentication: expose with care)")
	fl.IntVar(&f.maxConns, "max-connections", ops.DefaultMaxConns, "connections open at once on --listen (HTTP ones and the sessions they became); more are closed at once and counted in wsmux_connections_refused_total (0: no limit)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", ops.DefaultIdleTimeout, "close a kept-alive HTTP connection that has waited this long for its next request (sessions are not affected)")
	fl.DurationVar(&f.readHeader, "read-header-timeout", ops.DefaultReadHeaderTimeout, "close a connection whose request head has not arrived whole within this long")
	fl.StringSliceVar(&f.allowedOrigins, "allowed-origins", nil, "origins (SCHEME://HOST[:PORT], comma-separated or repeated) of web pages that may use this server from a browser besides its own; requests with another Origin header get 403 (clients that are not browsers send none)")
}

// conns are the listener's limits of the flags (--max-connections 0 is no
// limit).
func (f *serverFlags) conns() ops.ConnLimits {
	l := ops.ConnLimits{MaxConns: f.maxConns, IdleTimeout: f.idleTimeout, ReadHeaderTimeout: f.readHeader}
	if l.MaxConns == 0 {
		l.MaxConns = -1
	}
	return l
}

// serve listens on --listen and serves h until SIGTERM or SIGINT, then
// drains (see ops.Serve); m's sessions count against --max-connections.
func (f *serverFlags) serve(a *app, h http.Handler, requestClientCert bool, m *ops.Metrics, health *ops.Health, what string, kv ...any) error {
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w: pick another address or stop what uses it", f.listen, err)
	}
	ctx, cancel := a.signalContext()
	defer cancel()
	if f.pprof {
		h = ops.WithPprof(h)
	}
	a.log.Info(what+": serving", append([]any{"listen", ln.Addr().String(), "tls", f.cert != nil, "pprof", f.pprof,
		"allowed_origins", f.origins.Allowed(), "max_connections", f.maxConns, "idle_timeout", f.idleTimeout}, kv...)...)
	return ops.Serve(ctx, ln, h, ops.ServerOptions{
		Certificate: f.cert, RequestClientCert: requestClientCert,
		ShutdownTimeout: f.shutdownTimeout, Abort: a.aborted(), Logger: a.log,
		Conns: f.conns(), Metrics: m,
	}, m.Sessions, health)
}

// validate checks the listening flags, and loads the TLS pair, before
// anything is logged or listened on.
func (f *serverFlags) validate() error {
	if err := checkListen("--listen", f.listen); err != nil {
		return err
	}
	if f.shutdownTimeout <= 0 {
		return usageErrorf("--shutdown-timeout %s: want a positive duration, for example 30s", f.shutdownTimeout)
	}
	if f.idleTimeout <= 0 {
		return usageErrorf("--idle-timeout %s: want a positive duration, for example 2m", f.idleTimeout)
	}
	if f.readHeader <= 0 {
		return usageErrorf("--read-header-timeout %s: want a positive duration, for example 10s", f.readHeader)
	}
	if f.maxConns < 0 {
		return usageErrorf("--max-connections %d: want 0 (no limit) or more", f.maxConns)
	}
	origins, err := origin.Parse(f.allowedOrigins)
	if err != nil {
		return usageErrorf("--allowed-origins: %v", err)
	}
	f.origins = origins
	if (f.tlsCert == "") != (f.tlsKey == "") {
		return usageErrorf("--tls-cert and --tls-key go together: pass both (the certificate and its private key) or neither")
	}
	if f.tlsCert != "" {
		cert, err := loadKeyPair("--tls-cert", "--tls-key", f.tlsCert, f.tlsKey)
		if err != nil {
			return err
		}
		f.cert = cert
	}
	return nil
}

// drainBound is the mux CloseTimeout of a server's sessions: longer than
// --shutdown-timeout, so that the shutdown (which counts and reports what
// it aborts) ends a drain, not mux's own GOAWAY deadline (30 s by default,
// which would also cut a longer --shutdown-timeout short).
func drainBound(shutdown time.Duration) time.Duration {
	return max(mux.DefaultConfig().CloseTimeout, shutdown+5*time.Second)
}

// checkListen validates a HOST:PORT to listen on.
func checkListen(flag, addr string) error {
	if addr == "" {
		return usageErrorf("%s is required: HOST:PORT, for example 127.0.0.1:8080 (or :8080 for every interface)", flag)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return usageErrorf("%s %q: want HOST:PORT, for example 127.0.0.1:8080 (or :8080 for every interface)", flag, addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return usageErrorf("%s %q: port %q: want a number from 0 to 65535", flag, addr, port)
	}
	return nil
}

// loadKeyPair loads a PEM certificate and key named by two flags; swapped
// files and other mistakes are usage errors that name the flags.
func loadKeyPair(certFlag, keyFlag, certFile, keyFile string) (*tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err == nil {
		return &cert, nil
	}
	if _, err2 := tls.LoadX509KeyPair(keyFile, certFile); err2 == nil {
		return nil, usageErrorf("%s %s and %s %s are swapped: pass the certificate to %s and the private key to %s",
			certFlag, certFile, keyFlag, keyFile, certFlag, keyFlag)
	}
	return nil, usageErrorf("%s %s / %s %s: %v", certFlag, certFile, keyFlag, keyFile, err)
}

// readTokens reads a server's --token-file (a usage error naming the flag).
func readTokens(path string) ([]string, error) {
	t, err := auth.ReadTokens(path)
	if err != nil {
		return nil, usageErrorf("--token-file: %v", err)
	}
	return t, nil
}

func newTunnelServeCmd(a *app) *cobra.Command {
	var sf serverFlags
	var rf resumeFlag
	var aff affinityFlag
	var allow []string
	var dialTimeout time.Duration
	var lf limitFlags
	c := &cobra.Command{
		Use:   "serve --listen ADDR --allow HOST:PORT[,HOST:PORT...] --token-file FILE",
		Short: "Accept tunnel sessions and forward their streams to allow-listed targets",
		Long: `Accept tunnel sessions on /tunnel and forward each stream to the HOST:PORT it
names, if that target is on the --allow list (exact match). Other targets are
refused with a stream reset carrying code TARGET_NOT_ALLOWED (0x1001) and logged;
unreachable ones with TARGET_DIAL_FAILED (0x1002).

Callers must send "Authorization: Bearer TOKEN" with a token from --token-file
(compared in constant time); others get 401 and nothing is forwarded, and a
request with two Authorization headers gets 400. An upgrade from a web page
(its Origin header) of another origin than the server's gets 403 unless
--allowed-origins lists it. A kept-alive HTTP connection idle for --idle-timeout
is closed (sessions are not), and connections beyond --max-connections are
closed at once.

Also serves /healthz (200, or 503 while shutting down) and /metrics (Prometheus).
On SIGTERM or SIGINT: stop accepting, GOAWAY every session, let streams finish
for --shutdown-timeout, then close what is left.`,
		Example: `  wsmux tunnel serve --listen 127.0.0.1:8443 --allow 127.0.0.1:5432,db.internal:5432 --token-file tokens`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(allow) == 0 {
				return usageErrorf("--allow is required: the targets this server may dial, HOST:PORT")
			}
			if sf.tokenFile == "" {
				return usageErrorf("--token-file is required: a file of accepted bearer tokens, one per line")
			}
			if dialTimeout <= 0 {
				return usageErrorf("--dial-timeout %s: want a positive duration, for example 10s", dialTimeout)
			}
			if err := lf.validate(); err != nil {
				return err
			}
			if err := rf.validate(); err != nil {
				return err
			}
			affinity, err := aff.cookie()
			if err != nil {
				return err
			}
			if err := sf.validate(); err != nil {
				return err
			}
			tokens, err := readTokens(sf.tokenFile)
			if err != nil {
				return err
			}
			mc := &mux.Config{MaxStreams: lf.streams, CloseTimeout: drainBound(sf.shutdownTimeout)}
			srv, err := tunnel.NewServer(tunnel.ServerConfig{
				Allow:          allow,
				Auth:           auth.New(tokens, nil),
				Origins:        sf.origins,
				DialTimeout:    dialTimeout,
				Mux:            mc,
				Limits:         lf.limits(),
				Logger:         a.log,
				ResumeTimeout:  rf.timeout,
				AffinityCookie: affinity,
			})
			if err != nil {
				return usageErrorf("%v", err)
			}
			err = sf.serve(a, srv.Handler(), false, srv.Metrics(), srv.Health(), "tunnel", "allow", allow)
			srv.Wait()
			return err
		},
	}
	sf.register(c, "127.0.0.1:8080")
	c.Flags().StringSliceVar(&allow, "allow", nil, "targets that may be dialled, HOST:PORT, comma-separated or repeated (required)")
	c.Flags().DurationVar(&dialTimeout, "dial-timeout", 10*time.Second, "timeout of each target dial")
	lf.register(c, true)
	rf.registerServer(c)
	aff.register(c)
	return c
}

// clientFlags are the connection flags of the client commands.
type clientFlags struct {
	server             string
	tokenFile          string
	caFile             string
	clientCert         string
	clientKey          string
	insecureSkipVerify bool
	dialTimeout        time.Duration
}

func (f *clientFlags) register(c *cobra.Command) {
	fl := c.Flags()
	fl.StringVar(&f.server, "server", "", "server URL: http://, https://, ws:// or wss://HOST:PORT (required)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file whose first line is the bearer token to send")
	fl.StringVar(&f.caFile, "ca-file", "", "PEM CA bundle to verify the server with (default: system roots)")
	fl.StringVar(&f.clientCert, "client-cert", "", "PEM client certificate for mutual TLS; needs --client-key")
	fl.StringVar(&f.clientKey, "client-key", "", "PEM private key of --client-cert")
	fl.BoolVar(&f.insecureSkipVerify, "insecure-skip-tls-verify", false, "do not verify the server's certificate (testing only)")
	fl.DurationVar(&f.dialTimeout, "dial-timeout", 10*time.Second, "how long connecting to the server (TCP, TLS and the WebSocket upgrade) may take")
}

// load checks the flags and returns the token (may be empty with a client
// certificate) and the TLS configuration. Every mistake is a usage error
// naming its flag; nothing connects yet.
func (f *clientFlags) load() (string, *tls.Config, error) {
	if err := checkServerURL(f.server); err != nil {
		return "", nil, err
	}
	if f.dialTimeout <= 0 {
		return "", nil, usageErrorf("--dial-timeout %s: want a positive duration, for example 10s", f.dialTimeout)
	}
	if (f.clientCert == "") != (f.clientKey == "") {
		return "", nil, usageErrorf("--client-cert and --client-key go together: pass both or neither")
	}
	if f.tokenFile == "" && f.clientCert == "" {
		return "", nil, usageErrorf("--token-file (or --client-cert/--client-key) is required: the credentials to present")
	}
	var token string
	if f.tokenFile != "" {
		t, err := auth.ReadToken(f.tokenFile)
		if err != nil {
			return "", nil, usageErrorf("--token-file: %v", err)
		}
		token = t
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: f.insecureSkipVerify} //nolint:gosec // opt-in flag
	if f.caFile != "" {
		p, err := auth.LoadCertPool(f.caFile)
		if err != nil {
			return "", nil, usageErrorf("--ca-file: %v", err)
		}
		cfg.RootCAs = p
	}
	if f.clientCert != "" {
		cert, err := loadKeyPair("--client-cert", "--client-key", f.clientCert, f.clientKey)
		if err != nil {
			return "", nil, err
		}
		cfg.Certificates = []tls.Certificate{*cert}
	}
	return token, cfg, nil
}

func newTunnelForwardCmd(a *app) *cobra.Command {
	var cf clientFlags
	var rf resumeFlag
	var drain time.Duration
	c := &cobra.Command{
		Use:   "forward --server URL --token-file FILE [BIND:]LOCALPORT:HOST:PORT...",
		Short: "Listen locally and tunnel each connection to a target through the server",
		Long: `Listen on each LOCALPORT (on 127.0.0.1 unless BIND is given) and tunnel every
accepted connection, as one stream of a single wsmux session, to HOST:PORT as
dialled by the server ('wsmux tunnel serve'). The session is opened at start
(exit code 3 if the server rejects the token) and reopened when it ends.
A target the server refuses is logged and the local connection is reset.

Runs until SIGINT or SIGTERM; open connections then get --drain-timeout.`,
		Example: `  wsmux tunnel forward --server http://127.0.0.1:8443 --token-file token 15432:127.0.0.1:5432`,
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var fws []tunnel.Forward
			for _, s := range args {
				fw, err := tunnel.ParseForward(s)
				if err != nil {
					return usageErrorf("%v", err)
				}
				fws = append(fws, fw)
			}
			if drain <= 0 {
				return usageErrorf("--drain-timeout %s: want a positive duration, for example 10s", drain)
			}
			if err := rf.validate(); err != nil {
				return err
			}
			token, tlsCfg, err := cf.load()
			if err != nil {
				return err
			}
			f, err := tunnel.NewForwarder(tunnel.ClientConfig{
				Server: cf.server, Token: token, TLS: tlsCfg, DialTimeout: cf.dialTimeout, DrainTimeout: drain,
				ResumeTimeout: rf.timeout, Abort: a.aborted(), Logger: a.log,
			}, fws)
			if err != nil {
				return usageErrorf("%v", err)
			}
			// The local ports first: a port in use fails before anything
			// connects to the server.
			if err := f.Listen(); err != nil {
				return err
			}
			ctx, cancel := a.signalContext()
			defer cancel()
			if err := f.Connect(ctx); err != nil {
				f.Close()
				u, _ := tunnel.WebSocketURL(cf.server, tunnel.DefaultPath)
				return connectError(err, cf.server, "GET "+u+" (WebSocket upgrade)", cf.dialTimeout)
			}
			return f.Run(ctx)
		},
	}
	cf.register(c)
	rf.register(c)
	c.Flags().DurationVar(&drain, "drain-timeout", 10*time.Second, "on SIGINT/SIGTERM: how long open connections may finish (a second signal aborts them at once)")
	return c
}
