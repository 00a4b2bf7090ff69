package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"

	"github.com/wsmux/wsmux/e2e/kube/internal/kubelet"
	"github.com/wsmux/wsmux/internal/testnet"
)

// refusedPort is a port of the pods nothing listens on: the pod refuses it.
const refusedPort = 9090

// podRefusal is the message the pod's runtime (the kubelet stand-in) puts
// on the error stream of a refused connection.
var podRefusal = fmt.Sprintf("failed to connect to localhost:%d inside the pod %q: connection refused", refusedPort, execPod)

// testPortForward: bob forwards 8080 (the echo server) and 9090 (refused
// by the pod), with kubectl and with a port-forward client of streams
// opened by hand on the same server (the gateway, or the apiserver for the
// control leg).
func testPortForward(t *testing.T, k *testnet.Kubectl, kl *kubelet.Kubelet) {
	t.Run("kubectl", func(t *testing.T) { testKubectlRefusedPort(t, k, kl) })
	t.Run("streams", func(t *testing.T) { testStreamsRefusedPort(t, k, kl) })
}

// testKubectlRefusedPort: concurrent connections through kubectl
// port-forward work; a connection to the refused port gets nothing, and
// kubectl prints the pod's own message for it (it crossed the gateway and
// the apiserver intact). kubectl then ends the whole forward by its own
// choice (client-go's portforward closes the connection when any error
// stream carries a message: kubernetes/kubernetes#111825), straight to
// the apiserver as through the gateway, so that is not asserted:
// testStreamsRefusedPort shows the connection itself survives.
func testKubectlRefusedPort(t *testing.T, k *testnet.Kubectl, kl *kubelet.Kubelet) {
	f := startForward(t, k, bobToken, ":"+strconv.Itoa(kubelet.EchoPort), ":"+strconv.Itoa(refusedPort))
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- testnet.EchoThrough(f.addrs[0], 1<<20) }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	refusedBefore := kl.Refused()
	c, err := net.Dial("tcp", f.addrs[1])
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second)) // a hang guard
	got, _ := io.ReadAll(c)
	c.Close()
	if len(got) != 0 || kl.Refused() != refusedBefore+1 {
		t.Fatalf("port %d: read %q, the pod refused %d streams; want nothing and 1", refusedPort, got, kl.Refused()-refusedBefore)
	}
	// kubectl logs the pod's message with its quotes escaped.
	f.stderr.Await(t, strings.ReplaceAll(podRefusal, `"`, `\"`), 30*time.Second)
}

// forward is a running kubectl port-forward.
type forward struct {
	addrs  []string        // the local addresses, in the order of the ports
	stderr *testnet.Buffer // what kubectl printed on stderr
	done   chan struct{}   // closed when kubectl has exited
}

var forwarding = regexp.MustCompile(`Forwarding from 127\.0\.0\.1:(\d+) -> (\d+)`)

// startForward runs kubectl port-forward to the exec pod with token; it
// stops at t's cleanup.
func startForward(t *testing.T, k *testnet.Kubectl, token string, ports ...string) *forward {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := k.Cmd(ctx, token, nil, append([]string{"port-forward", "-n", ns, "pod/" + execPod}, ports...)...)
	f := &forward{stderr: &testnet.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = f.stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait(); close(f.done) }()
	t.Cleanup(func() { cancel(); <-f.done })
	sc := bufio.NewScanner(stdout)
	for len(f.addrs) < len(ports) && sc.Scan() {
		if m := forwarding.FindStringSubmatch(sc.Text()); m != nil {
			f.addrs = append(f.addrs, "127.0.0.1:"+m[1])
		}
	}
	if len(f.addrs) < len(ports) {
		cancel()
		<-f.done
		t.Fatalf("kubectl port-forward printed %d addresses of %d; stderr %q", len(f.addrs), len(ports), f.stderr.String())
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }() // "Handling connection for ..."
	return f
}

// testStreamsRefusedPort drives the port-forward protocol by hand over one
// SPDY connection to k's server, as bob: a connection to the echo port is
// opened and kept; a second, to the refused port, gets the pod's message on
// its error stream; then the first still echoes and a third opens and
// echoes 1 MiB. So nothing between kubectl and the pod (the gateway, its
// upstream leg, the apiserver, the kubelet) ends the forward for one
// refused connection.
func testStreamsRefusedPort(t *testing.T, k *testnet.Kubectl, kl *kubelet.Kubelet) {
	ca, err := os.ReadFile(k.CA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &rest.Config{Host: k.Server, BearerToken: bobToken, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}
	rt, up, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(k.Server + "/api/v1/namespaces/" + ns + "/pods/" + execPod + "/portforward")
	conn, proto, err := spdy.NewDialer(up, &http.Client{Transport: rt}, http.MethodPost, u).Dial("portforward.k8s.io")
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	defer conn.Close()
	if proto != "portforward.k8s.io" {
		t.Fatalf("protocol %q, want portforward.k8s.io", proto)
	}
	held := openPair(t, conn, kubelet.EchoPort, 1)
	held.echo(t, []byte("before the refusal"))

	refusedBefore := kl.Refused()
	refused := openPair(t, conn, refusedPort, 2)
	msg := refused.errors(t)
	if !strings.Contains(msg, podRefusal) {
		t.Fatalf("error stream of the refused connection: %q, want the pod's %q", msg, podRefusal)
	}
	if n := kl.Refused() - refusedBefore; n != 1 {
		t.Fatalf("the pod refused %d streams, want 1", n)
	}
	_ = refused.data.Reset()

	held.echo(t, []byte("after the refusal"))
	third := openPair(t, conn, kubelet.EchoPort, 3)
	data := make([]byte, 1<<20)
	rand.Read(data)
	go func() { _, _ = third.data.Write(data); _ = third.data.Close() }()
	got, err := io.ReadAll(third.data)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a new connection after the refusal: %d bytes back of %d (%v)", len(got), len(data), err)
	}
	if msg := third.errors(t); msg != "" {
		t.Fatalf("error stream of a good connection: %q", msg)
	}
	select {
	case <-conn.CloseChan():
		t.Fatal("the port-forward connection closed")
	default:
	}
}

// pair is the two streams of one forwarded connection.
type pair struct {
	data    httpstream.Stream
	errDone chan string // what the error stream carried, once it ended
}

func openPair(t *testing.T, conn httpstream.Connection, port, id int) *pair {
	t.Helper()
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(port))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.Itoa(id))
	es, err := conn.CreateStream(h)
	if err != nil {
		t.Fatalf("error stream: %v", err)
	}
	_ = es.Close() // the client never writes on it
	p := &pair{errDone: make(chan string, 1)}
	go func() { b, _ := io.ReadAll(es); p.errDone <- string(b) }()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	if p.data, err = conn.CreateStream(h); err != nil {
		t.Fatalf("data stream: %v", err)
	}
	return p
}

// echo writes b on the data stream and reads it back (the stream stays
// open).
func (p *pair) echo(t *testing.T, b []byte) {
	t.Helper()
	if _, err := p.data.Write(b); err != nil {
		t.Fatalf("write: %v", err)
	}
	got := make([]byte, len(b))
	read := make(chan error, 1)
	go func() { _, err := io.ReadFull(p.data, got); read <- err }()
	select {
	case err := <-read:
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("echo of %q: %q, %v", b, got, err)
		}
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatalf("echo of %q: nothing back after 30 s", b)
	}
}

// errors is what the pair's error stream carried.
func (p *pair) errors(t *testing.T) string {
	t.Helper()
	select {
	case s := <-p.errDone:
		return s
	case <-time.After(30 * time.Second): // a hang guard
		t.Fatal("the error stream did not end within 30 s")
		return ""
	}
}
