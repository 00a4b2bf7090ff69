// Command wsmux runs wsmux's servers and clients: an authenticated
// exec/attach/port-forward gateway in front of a Kubernetes cluster, the
// matching exec and port-forward clients, and a plain TCP tunnel over one
// WebSocket.
//
// Exit codes (scripts may rely on them):
//
//	0  success
//	1  runtime error (network, server, I/O, a failed remote operation)
//	2  usage error (unknown command or flag, bad or missing arguments)
//	3  authentication failure (the server rejected a client's credentials: 401;
//	   a 403 means the server does not speak wsmux or forbids the request: 1)
//
// `wsmux exec` exits with the remote command's exit status when the command
// ran and failed with one, as kubectl exec does.
package main

import (
	"os"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
