package gateway

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/gateway/recording"
	"github.com/wsmux/wsmux/internal/testnet"
)

// TestRecordKubectlTTY: kubectl exec -it on a pseudo-terminal, a shell on
// one in the stand-in pod: what is typed runs, a resize reaches the shell,
// Ctrl-C interrupts a command, the exit code comes back; the recording
// holds the terminal's output as the client got it, the resize, the exit
// code, and no stdin (the policy did not ask for it). The replay of such a
// recording is compared in Chromium by gateway/webui's TestRecordingReplay.
func TestRecordKubectlTTY(t *testing.T) {
	e := startRecorded(t, recording.Config{}, true)
	for _, mode := range []struct {
		name string
		env  []string
	}{{"websocket", wsOn}, {"spdy", spdyOnly}} {
		t.Run(mode.name, func(t *testing.T) {
			client, c := RunInteractive(t, e.k, mode.env)
			rec := e.next(t)
			if c != 3 {
				t.Errorf("kubectl exit code %d, want 3", c)
			}
			if rec.exit() != "3" || rec.width != 80 || rec.height != 24 || !rec.meta.TTY || rec.meta.Stdin {
				t.Errorf("recording: exit %q, size %dx%d, tty %v, stdin %v", rec.exit(), rec.width, rec.height, rec.meta.TTY, rec.meta.Stdin)
			}
			if got := rec.text("r"); got != "100x30" {
				t.Errorf("resizes %q, want 100x30", got)
			}
			if got := rec.text("i"); got != "" {
				t.Errorf("stdin recorded without being asked for: %q", got)
			}
			out := rec.text("o")
			for _, want := range []string{"hello-42", "30 100", "after-5"} {
				if !strings.Contains(out, want) {
					t.Errorf("recorded output lacks %q:\n%q", want, out)
				}
			}
			// The client got exactly the recorded output, then kubectl's
			// own last words.
			if rest, ok := strings.CutPrefix(string(client), out); !ok || rest != "command terminated with exit code 3\r\n" {
				t.Errorf("the client's terminal got\n%q\nthe recording has\n%q", client, out)
			}
		})
	}
}

// RunInteractive runs the interactive session of the recording tests:
// kubectl exec -it sh (prompt "rec> ") on a pseudo-terminal of 80x24 through the gateway of
// k, typing a command, resizing to 100x30, interrupting a sleep with
// Ctrl-C and exiting with 3. It returns what the client's terminal got
// and kubectl's exit code.
func RunInteractive(t testing.TB, k *testnet.Kubectl, env []string) ([]byte, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	kc := k.Cmd(ctx, "alice-token", env, "exec", "-it", "-n", "a", "web-0", "--", "env", "PS1=rec> ", "sh")
	p, err := testnet.StartOnPTY(kc, 80, 24)
	if err != nil {
		t.Fatal(err)
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
	step("\x03", "\n")
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
