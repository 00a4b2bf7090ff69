package controller

import (
	"os/exec"
	"testing"
)

// TestPythonHelperMintsVectors runs the Python helper's tests
// (examples/controller-python) against the same vectors as
// TestTicketVectors: both helpers mint byte-identical tickets.
func TestPythonHelperMintsVectors(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found in PATH: install Python 3.9 or later to test the Python helper (.ci/run installs it in CI)")
	}
	out, err := exec.Command(py, "../examples/controller-python/test_wsmux_controller.py", "-v").CombinedOutput()
	if err != nil {
		t.Fatalf("python helper tests: %v\n%s", err, out)
	}
	t.Logf("%s", out)
}
