package testnet

import (
	"context"
	"os/exec"
	"testing"
	"time"
)

// InteractiveExit is what InteractiveSession's shell exits with.
const InteractiveExit = 3

// InteractiveSession is the interactive session of the recording tests:
// kubectl exec -it (on a pseudo-terminal of 80x24, as the caller of token)
// of sh, prompt "rec> ", in pod a/web-0: it types a command, resizes the
// terminal to 100x30 and asks the shell its size, interrupts a sleep with
// Ctrl-C, and exits with InteractiveExit. It returns what the client's
// terminal got and kubectl's exit code.
func InteractiveSession(t testing.TB, k *Kubectl, token string, env []string) ([]byte, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kc := k.Cmd(ctx, token, env, "exec", "-it", "-n", "a", "web-0", "--", "env", "PS1=rec> ", "sh")
	p, err := StartOnPTY(kc, 80, 24)
	if err != nil {
		t.Skipf("no pseudo-terminal for kubectl: %v", err)
	}
	at := 0
	step := func(typed, want string) {
		t.Helper()
		if typed != "" {
			if err := p.Type(typed); err != nil {
				t.Fatal(err)
			}
		}
		if at, err = p.WaitFor(ctx, at, want); err != nil {
			_ = kc.Process.Kill()
			t.Fatalf("%v; the terminal got %q", err, p.Output())
		}
	}
	step("", "rec> ") // typed before kubectl's terminal is raw, it would echo twice
	step("echo hello-$((6*7))\r", "hello-42")
	if err := p.Resize(100, 30); err != nil {
		t.Fatal(err)
	}
	step("stty size\r", "30 100")
	step("echo zz$((1+1)); sleep 30\r", "zz2")
	step("\x03", "rec> ")
	step("echo after-$((2+3))\r", "after-5")
	step("exit 3\r", "exit 3")
	err = kc.Wait()
	_ = p.Close()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return p.Output(), code
}
