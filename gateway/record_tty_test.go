package gateway

import (
	"strings"
	"testing"

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
			client, c := testnet.InteractiveSession(t, e.k, "alice-token", mode.env)
			rec := e.next(t)
			if c != testnet.InteractiveExit {
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
