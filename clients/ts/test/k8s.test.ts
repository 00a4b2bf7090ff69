// The Kubernetes exec helpers: request paths and the error stream's Status.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execPath, parseExecStatus, streamProtocolOffer, bearerProtocol } from "../src/index.js";

test("execPath carries the command and the stream flags as client-go does", () => {
  assert.equal(
    execPath({ namespace: "ns", pod: "p-0", container: "app", command: ["sh", "-c", "echo a&b"], stdin: true, tty: true }),
    "/api/v1/namespaces/ns/pods/p-0/exec?command=sh&command=-c&command=echo+a%26b&container=app&stdout=true&stdin=true&tty=true",
  );
  assert.equal(execPath({ namespace: "ns", pod: "p", command: ["ls"] }), "/api/v1/namespaces/ns/pods/p/exec?command=ls&stdout=true&stderr=true");
});

test("the error stream's Status gives the exit code", () => {
  const table: Array<[string, number | null, string]> = [
    ["", 0, ""],
    ['{"metadata":{},"status":"Success"}', 0, ""],
    [
      '{"metadata":{},"status":"Failure","message":"command terminated with non-zero exit code: exit status 3","reason":"NonZeroExitCode","details":{"causes":[{"reason":"ExitCode","message":"3"}]}}',
      3,
      "command terminated with non-zero exit code: exit status 3",
    ],
    ['{"status":"Failure","message":"container not found"}', null, "container not found"],
    ["not json", null, "not json"],
  ];
  for (const [text, code, msg] of table) assert.deepEqual(parseExecStatus(text), { exitCode: code, message: msg }, text);
});

test("browser subprotocols: the token as Kubernetes' bearer subprotocol, the stream protocol version", () => {
  assert.equal(bearerProtocol("secret-token"), "base64url.bearer.authorization.k8s.io.c2VjcmV0LXRva2Vu");
  assert.deepEqual(streamProtocolOffer(), ["x-stream-protocol-version.v4.channel.k8s.io"]);
});
