package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wsmux/wsmux/internal/testnet"
)

// TestDemo starts `wsmux demo` and uses it as its printed instructions
// say: the real kubectl with the written kubeconfig (exec with exit code,
// cp both ways, port-forward to the web pod, a namespace the demo user may
// not use) and `wsmux exec`.
func TestDemo(t *testing.T) {
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		t.Skip("kubectl not found in PATH: install kubectl to run the demo's end-to-end test")
	}
	dir := t.TempDir()
	pr, pw := io.Pipe()
	var errb testnet.Buffer
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	go func() {
		a := &app{stdin: strings.NewReader(""), stdout: pw, stderr: &errb, ctx: ctx}
		done <- runApp(a, []string{"demo", "--listen", "127.0.0.1:0", "--dir", dir})
		pw.Close()
	}()
	defer func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("demo exited %d; stderr:\n%s", code, errb.String())
		}
	}()
	var printed strings.Builder
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		printed.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "Ctrl-C") {
			break
		}
	}
	go io.Copy(io.Discard, pr)
	out := printed.String()
	kubeconfig := regexp.MustCompile(`export KUBECONFIG=(\S+)`).FindStringSubmatch(out)
	wsmuxExec := regexp.MustCompile(`\S+ exec (--server .*) shell -- uname -a`).FindStringSubmatch(out)
	if kubeconfig == nil || wsmuxExec == nil || !strings.Contains(out, "kubectl exec -it shell -- sh") || !strings.Contains(out, "kubectl port-forward pod/web 8080:80") {
		t.Fatalf("demo printed:\n%s\nstderr:\n%s", out, errb.String())
	}
	home := t.TempDir()
	kc := func(ctx context.Context, args ...string) *exec.Cmd {
		c := exec.CommandContext(ctx, kubectl, args...)
		c.Env = []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "KUBECONFIG=" + kubeconfig[1]}
		return c
	}
	run := func(stdin string, args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		c := kc(ctx, args...)
		var o, e bytes.Buffer
		c.Stdin, c.Stdout, c.Stderr = strings.NewReader(stdin), &o, &e
		err := c.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return o.String(), e.String(), code
	}
	shellDir := filepath.Join(dir, "shell")
	o, e, code := run("", "exec", "shell", "--", "sh", "-c", "pwd; exit 4")
	if code != 4 || o != shellDir+"\n" {
		t.Errorf("exec: exit %d, stdout %q, stderr %q", code, o, e)
	}
	o, e, code = run("piped stdin", "exec", "-i", "shell", "--", "cat")
	if code != 0 || o != "piped stdin" {
		t.Errorf("exec -i: exit %d, stdout %q, stderr %q", code, o, e)
	}
	_, e, code = run("", "-n", "kube-system", "exec", "shell", "--", "true")
	if code != 1 || !strings.Contains(e, `User "demo" cannot`) {
		t.Errorf("another namespace: exit %d, stderr %q", code, e)
	}
	data := make([]byte, 4<<20)
	rand.Read(data)
	local := filepath.Join(home, "up.bin")
	os.WriteFile(local, data, 0o600)
	if _, e, code := run("", "cp", local, "shell:"+filepath.Join(shellDir, "up.bin")); code != 0 {
		t.Fatalf("cp up: exit %d, %s", code, e)
	}
	back := filepath.Join(home, "back.bin")
	if _, e, code := run("", "cp", "shell:"+filepath.Join(shellDir, "up.bin"), back); code != 0 {
		t.Fatalf("cp down: exit %d, %s", code, e)
	}
	if got, _ := os.ReadFile(back); sha256.Sum256(got) != sha256.Sum256(data) {
		t.Errorf("cp round trip: %d bytes, sha256 differs", len(got))
	}

	// exec -it on a terminal (script(1) provides one): the command runs on
	// a pseudo-terminal of the same size.
	if script, err := exec.LookPath("script"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		c := exec.CommandContext(ctx, script, "-qec", "stty cols 90 rows 20; exec '"+kubectl+"' exec -it shell -- sh -c 'stty size; tty; exit 5'", "/dev/null")
		c.Env = kc(ctx).Env
		o, err := c.CombinedOutput()
		cancel()
		if !strings.Contains(string(o), "20 90") || !strings.Contains(string(o), "/dev/pts/") {
			t.Errorf("exec -it: %v, output %q; want the terminal's size and a pts", err, o)
		}
	}

	// port-forward to the web pod's port 80.
	pfCtx, pfCancel := context.WithCancel(context.Background())
	pf := kc(pfCtx, "port-forward", "pod/web", ":80")
	stdout, _ := pf.StdoutPipe()
	if err := pf.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { pfCancel(); _ = pf.Wait() }()
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	m := regexp.MustCompile(`127\.0\.0\.1:(\d+) -> 80`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("port-forward printed %q", line)
	}
	go io.Copy(io.Discard, stdout)
	resp, err := http.Get("http://127.0.0.1:" + m[1] + "/hello")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	if !strings.Contains(string(body), "Hello from pod web") || !strings.Contains(string(body), "GET /hello") {
		t.Errorf("web through port-forward: %q", body)
	}

	// wsmux exec, as printed.
	args := append(strings.Fields(wsmuxExec[1]), "shell", "--", "echo", "via wsmux")
	code, o, e = invoke(context.Background(), nil, append([]string{"exec"}, args...)...)
	if code != 0 || o != "via wsmux\n" {
		t.Errorf("wsmux exec: exit %d, stdout %q, stderr %q", code, o, e)
	}
}

func TestDemoRefusesNonLoopback(t *testing.T) {
	code, _, e := invoke(nil, nil, "demo", "--listen", "0.0.0.0:0")
	if code != exitUsage || !strings.Contains(e, "--expose-local-shell-to-network") {
		t.Fatalf("exit %d, stderr %q", code, e)
	}
}
