package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes; see the package documentation.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

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

func newRootCmd(stdin io.Reader, stdout, stderr io.Writer) *cobra.Command {
	var logLevel, logFormat string
	root := &cobra.Command{
		Use:   "wsmux-bench",
		Short: "Benchmark wsmux side by side with SPDY, yamux, smux and the raw TCP/WebSocket ceilings",
		Long: `wsmux-bench runs wsmux's benchmarks: bench compares it with the other
transports, idle measures the server's memory per idle session.

Exit codes:
  0  success
  1  runtime error
  2  usage error (unknown command or flag, bad arguments)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// --log-level and --log-format are wsmux's: accepted and checked
		// so that its command lines keep working, though nothing here logs.
		PersistentPreRunE: func(*cobra.Command, []string) error {
			var lvl slog.Level
			if err := lvl.UnmarshalText([]byte(logLevel)); err != nil {
				return usageErrorf("--log-level %q: want debug, info, warn or error", logLevel)
			}
			if logFormat != "text" && logFormat != "json" {
				return usageErrorf("--log-format %q: want text or json", logFormat)
			}
			return nil
		},
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.PersistentFlags().StringVar(&logLevel, "log-level", "info", "log threshold: debug, info, warn or error (as wsmux's; nothing is logged)")
	root.PersistentFlags().StringVar(&logFormat, "log-format", "text", "log format: text or json (as wsmux's; nothing is logged)")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &codeError{code: exitUsage, err: err}
	})
	root.AddCommand(newBenchCmd(), newIdleCmd())
	return root
}

// run executes the command line under ctx and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd(stdin, stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "wsmux-bench: %v\n", err)
	if code == exitUsage {
		fmt.Fprintln(stderr, "Run 'wsmux-bench --help' (or 'wsmux-bench COMMAND --help') for usage.")
	}
	return code
}

func exitCode(err error) int {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
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
