package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/wsmux/wsmux/mux"
)

// Exit codes; see the package documentation.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
	exitAuth  = 3
)

// extraCommands are subcommands defined in other files of this package
// (for example the benchmark's `bench`), each appended from an init func:
//
//	func init() { extraCommands = append(extraCommands, newBenchCmd) }
var extraCommands []func() *cobra.Command

// codeError carries an exit code through cobra.
type codeError struct {
	code int
	err  error
}

func (e *codeError) Error() string { return e.err.Error() }
func (e *codeError) Unwrap() error { return e.err }

func usageErrorf(format string, a ...any) error {
	return &codeError{code: exitUsage, err: fmt.Errorf(format, a...)}
}

func authError(err error) error { return &codeError{code: exitAuth, err: err} }

// app is the state shared by the commands of one invocation.
type app struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	logLevel       string
	logFormat      string
	log            *slog.Logger
	// ctx, when set, replaces the signal context (tests).
	ctx context.Context
	// abort is closed by a second SIGINT or SIGTERM (stopNow): drains end
	// at once. See signalContext.
	abort     chan struct{}
	abortOnce sync.Once
	closeOnce sync.Once
}

// stopNow closes a.aborted() (the second signal).
func (a *app) stopNow() {
	a.aborted()
	a.closeOnce.Do(func() { close(a.abort) })
}

// aborted returns the channel a second signal closes.
func (a *app) aborted() <-chan struct{} {
	a.abortOnce.Do(func() {
		if a.abort == nil {
			a.abort = make(chan struct{})
		}
	})
	return a.abort
}

// signalContext is cancelled by the first SIGINT or SIGTERM (or a.ctx):
// servers and forwarders then drain. A second signal closes a.aborted():
// what is still running is aborted at once, as kubectl, docker and most
// servers do. Both are logged.
func (a *app) signalContext() (context.Context, context.CancelFunc) {
	a.aborted()
	if a.ctx != nil {
		return context.WithCancel(a.ctx)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			a.log.Info("received "+signalName(sig)+": stopping gracefully; send it again to stop at once", "signal", signalName(sig))
			cancel()
		case <-done:
			return
		}
		select {
		case sig := <-ch:
			a.log.Warn("received a second "+signalName(sig)+": stopping at once", "signal", signalName(sig))
			a.stopNow()
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

func signalName(sig os.Signal) string {
	switch sig {
	case os.Interrupt:
		return "SIGINT"
	case syscall.SIGTERM:
		return "SIGTERM"
	}
	return sig.String()
}

func newRootCmd(a *app) *cobra.Command {
	root := &cobra.Command{
		Use:   "wsmux",
		Short: "Kubernetes exec/port-forward gateway and TCP tunnel over multiplexed WebSockets",
		Long: `wsmux runs stream multiplexing over one WebSocket (subprotocol wsmux.v1) where
SPDY does not pass: an authenticated gateway in front of a Kubernetes cluster for
exec, attach and port-forward, its clients, and a plain TCP tunnel.

Exit codes:
  0  success
  1  runtime error
  2  usage error (unknown command or flag, bad arguments)
  3  authentication failure (credentials rejected by the server: 401)
wsmux exec exits with the remote command's status when it ran and failed.

Logs go to standard error (log/slog) as text, or as JSON with --log-format json;
--log-level sets the threshold. SIGINT or SIGTERM stops gracefully (servers and
forwarders drain); a second one stops at once, aborting what still runs
(exit code 1).`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(a.logLevel)); err != nil {
				return usageErrorf("--log-level %q: want debug, info, warn or error", a.logLevel)
			}
			opts := &slog.HandlerOptions{Level: lvl}
			switch a.logFormat {
			case "text":
				a.log = slog.New(slog.NewTextHandler(a.stderr, opts))
			case "json":
				a.log = slog.New(slog.NewJSONHandler(a.stderr, opts))
			default:
				return usageErrorf("--log-format %q: want text or json", a.logFormat)
			}
			return nil
		},
	}
	root.Version = versionString()
	root.SetVersionTemplate("{{.Version}}\n")
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.PersistentFlags().StringVar(&a.logLevel, "log-level", "info", "log threshold: debug, info, warn or error")
	root.PersistentFlags().StringVar(&a.logFormat, "log-format", "text", "log format on standard error: text or json")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &codeError{code: exitUsage, err: err}
	})
	root.AddCommand(newTunnelCmd(a), newGatewayCmd(a), newExecCmd(a), newPortForwardCmd(a), newDemoCmd(a), newVersionCmd())
	for _, f := range extraCommands {
		root.AddCommand(f())
	}
	return root
}

// run executes the command line and returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return runApp(&app{stdin: stdin, stdout: stdout, stderr: stderr}, args)
}

func runApp(a *app, args []string) int {
	root := newRootCmd(a)
	root.SetArgs(args)
	err := root.Execute()
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	fmt.Fprintf(a.stderr, "wsmux: %v\n", err)
	if code == exitUsage {
		fmt.Fprintln(a.stderr, "Run 'wsmux --help' (or 'wsmux COMMAND --help') for usage.")
	}
	return code
}

func exitCode(err error) int {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	// Only a 401 is a rejection of the credentials: a 403 comes from a
	// server that does not speak wsmux (or a proxy refusing the upgrade).
	var he *mux.HandshakeError
	if errors.As(err, &he) && he.StatusCode == 401 {
		return exitAuth
	}
	// cobra's own argument errors are plain errors.
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "required flag", "accepts ", "requires at least", "requires at most", "invalid argument"} {
		if strings.HasPrefix(msg, p) {
			return exitUsage
		}
	}
	return exitError
}
