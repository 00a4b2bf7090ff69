package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/client-go/tools/remotecommand"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/wsmux/wsmux/gateway/kubeclient"
)

func newExecCmd(a *app) *cobra.Command {
	var cf clientFlags
	var rf resumeFlag
	var namespace, container string
	var stdin, tty bool
	c := &cobra.Command{
		Use:   "exec --server URL --token-file FILE [-n NAMESPACE] POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]",
		Short: "Run a command in a container through a wsmux gateway, like kubectl exec",
		Long: `Run a command in a container through a wsmux gateway ('wsmux gateway'), with
client-go's remotecommand protocol carried by one wsmux WebSocket.

-i passes standard input; -t allocates a terminal: the local terminal is put in
raw mode (restored on exit) and window size changes (SIGWINCH) are sent to the
container. Exits with the command's exit status when it failed with one; 3 when
the gateway rejects the credentials.`,
		Example: `  wsmux exec --server https://gw:8443 --token-file token -n shop web-0 -c app -it -- sh
  wsmux exec --server https://gw:8443 --token-file token web-0 -- ls /`,
		Args: func(cmd *cobra.Command, args []string) error {
			dash := cmd.ArgsLenAtDash()
			switch {
			case len(args) == 0, dash == 0:
				return usageErrorf("POD is required: wsmux exec POD -- COMMAND [ARG...]")
			case dash == -1 && len(args) < 2, dash == len(args):
				return usageErrorf("COMMAND is required: wsmux exec POD -- COMMAND [ARG...]")
			case dash > 1:
				return usageErrorf("exactly one POD before --, got %v", args[:dash])
			}
			if err := checkName("POD", args[0]); err != nil {
				return err
			}
			return checkName("--namespace", namespace)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := rf.validate(); err != nil {
				return err
			}
			token, tlsCfg, err := cf.load()
			if err != nil {
				return err
			}
			pod, command := args[0], args[1:]
			opts := kubeclient.ExecOptions{
				Namespace: namespace, Pod: pod, Container: container, Command: command,
				Stdout: a.stdout, Stderr: a.stderr,
			}
			if stdin {
				opts.Stdin = a.stdin
			}
			if tty {
				restore, sizes, ok := a.setupTTY(stdin)
				if ok {
					defer restore()
					opts.TTY = true
					opts.Sizes = sizes
				}
			}
			ctx, cancel := a.signalContext()
			defer cancel()
			o := kubeclient.Options{Server: cf.server, Token: token, TLS: tlsCfg, DialTimeout: cf.dialTimeout,
				ResumeTimeout: rf.timeout, OnResumeEvent: rf.logTo(a.log, "exec")}
			err = kubeclient.Exec(ctx, o, opts)
			return execError(err, cf, o.RequestLine(namespace, pod, "exec"))
		},
	}
	cf.register(c)
	rf.register(c)
	fl := c.Flags()
	fl.StringVarP(&namespace, "namespace", "n", "default", "namespace of the pod")
	fl.StringVarP(&container, "container", "c", "", "container name (default: the pod's default container)")
	fl.BoolVarP(&stdin, "stdin", "i", false, "pass standard input to the container")
	fl.BoolVarP(&tty, "tty", "t", false, "allocate a terminal (stdin must be one for raw mode)")
	return c
}

// execError maps a remote exit status to the exit code, and a failed
// connection to an error that says what to do (exit code 3 for rejected
// credentials). what names the request as it goes on the wire.
func execError(err error, cf clientFlags, what string) error {
	if err == nil {
		return nil
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		return &codeError{code: ee.ExitStatus(), err: fmt.Errorf("command terminated with exit code %d", ee.ExitStatus())}
	}
	return connectError(err, cf.server, what, cf.dialTimeout)
}

// checkName validates a namespace or pod name (a DNS-1123 subdomain, as
// the gateway accepts) before anything connects.
func checkName(what, name string) error {
	if name == "" || len(name) > 253 || !podNameRE.MatchString(name) {
		return usageErrorf("%s %q: want a Kubernetes name (lower-case letters, digits, '-' and '.')", what, name)
	}
	return nil
}

var podNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`)

// setupTTY puts the local terminal in raw mode and returns the restore
// function and a size queue fed by SIGWINCH. ok is false (with a warning)
// when standard input is not a terminal.
func (a *app) setupTTY(withStdin bool) (restore func(), sizes remotecommand.TerminalSizeQueue, ok bool) {
	in, inOK := a.stdin.(*os.File)
	out, outOK := a.stdout.(*os.File)
	if !inOK || !outOK || !term.IsTerminal(int(in.Fd())) {
		fmt.Fprintln(a.stderr, "Unable to use a TTY - input is not a terminal or the right kind of file")
		return nil, nil, false
	}
	var state *term.State
	if withStdin {
		s, err := term.MakeRaw(int(in.Fd()))
		if err != nil {
			fmt.Fprintln(a.stderr, "Unable to use a TTY:", err)
			return nil, nil, false
		}
		state = s
	}
	q := &winchQueue{fd: int(out.Fd()), ch: make(chan *remotecommand.TerminalSize, 1), stop: make(chan struct{})}
	q.start()
	return func() {
		q.close()
		if state != nil {
			_ = term.Restore(int(in.Fd()), state)
		}
	}, q, true
}

// winchQueue reports the terminal's size now and whenever it changes
// (watchResize: SIGWINCH, or a poll where there is no such signal).
type winchQueue struct {
	fd        int
	ch        chan *remotecommand.TerminalSize
	stop      chan struct{}
	stopWatch func()
	last      remotecommand.TerminalSize
}

func (q *winchQueue) size() *remotecommand.TerminalSize {
	w, h, err := term.GetSize(q.fd)
	if err != nil {
		return nil
	}
	return &remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
}

func (q *winchQueue) start() {
	resized, stopWatch := watchResize()
	q.stopWatch = stopWatch
	if s := q.size(); s != nil {
		q.last = *s
		q.ch <- s
	}
	go func() {
		for {
			select {
			case <-q.stop:
				return
			case <-resized:
				if s := q.size(); s != nil && *s != q.last {
					q.last = *s
					select {
					case <-q.ch: // replace a size not yet taken
					default:
					}
					q.ch <- s
				}
			}
		}
	}()
}

func (q *winchQueue) close() {
	q.stopWatch()
	close(q.stop)
}

// Next implements remotecommand.TerminalSizeQueue; nil ends the queue.
func (q *winchQueue) Next() *remotecommand.TerminalSize {
	select {
	case s := <-q.ch:
		return s
	case <-q.stop:
		return nil
	}
}
