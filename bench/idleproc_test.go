package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/wsmux/wsmux/mux"
)

// A second process that exits before it opened its sessions (one that is
// not the client at all, as when the command names a subcommand that does
// not exist) ends the run at once with an error saying so, and leaves no
// goroutine behind.
func TestRunIdleServerClientExits(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The deadline only turns a hang into a failure.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = RunIdleServer(ctx, IdleRun{
		Sessions: 5,
		Driver:   mux.DriverEventLoop,
		Client: func(string) *exec.Cmd {
			return exec.Command(self, "-test.run=^$") // runs no test and exits
		},
	})
	if err == nil || !strings.Contains(err.Error(), "bench-idle client: exited before it was ready") {
		t.Fatalf("RunIdleServer: %v, want the client's early exit", err)
	}
	goleak.VerifyNone(t, leakOptions()...)
}
