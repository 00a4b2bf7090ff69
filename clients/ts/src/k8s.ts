// Kubernetes exec over WSMUX/1: the remotecommand stream protocol
// (v4.channel.k8s.io, as over SPDY: one stream per channel, named by the
// streamtype header) on a Session, as wsmux gateway bridges it to a pod.

import type { Session } from "./session.js";
import type { Stream } from "./stream.js";

/** The remotecommand version this client speaks (exit codes in a metav1.Status on the error stream). */
export const EXEC_PROTOCOL = "v4.channel.k8s.io";

/**
 * Subprotocols that carry the X-Stream-Protocol-Version header from a
 * browser, which cannot set request headers on a WebSocket: wsmux gateway's
 * web UI turns x-stream-protocol-version.NAME into that header.
 */
export function streamProtocolOffer(versions: string[] = [EXEC_PROTOCOL]): string[] {
  return versions.map((v) => "x-stream-protocol-version." + v);
}

/** What to run: the query of .../pods/POD/exec. */
export interface ExecTarget {
  namespace: string;
  pod: string;
  container?: string;
  command: string[];
  stdin?: boolean;
  tty?: boolean;
}

/** The path and query of an exec request. */
export function execPath(t: ExecTarget): string {
  const q = new URLSearchParams();
  for (const c of t.command) q.append("command", c);
  if (t.container) q.set("container", t.container);
  q.set("stdout", "true");
  if (t.stdin) q.set("stdin", "true");
  if (t.tty) q.set("tty", "true");
  else q.set("stderr", "true");
  return `/api/v1/namespaces/${encodeURIComponent(t.namespace)}/pods/${encodeURIComponent(t.pod)}/exec?${q}`;
}

/** How an exec ended. */
export interface ExecStatus {
  /** The command's exit code (0 on success); null when it failed without one. */
  exitCode: number | null;
  /** The Status message (empty on success). */
  message: string;
}

/** A running exec: its streams and its end. */
export interface Exec {
  stdin: WritableStream<Uint8Array | string> | null;
  stdout: ReadableStream<Uint8Array>;
  stderr: ReadableStream<Uint8Array> | null;
  /** Sends the terminal size (the resize stream); no-op without a tty. */
  resize(cols: number, rows: number): Promise<void>;
  /** Resolves when the command ended, from the error stream's Status. */
  status: Promise<ExecStatus>;
}

/** Parses the metav1.Status of the error stream (empty: success). */
export function parseExecStatus(text: string): ExecStatus {
  if (text.trim() === "") return { exitCode: 0, message: "" };
  let st: { status?: string; message?: string; reason?: string; details?: { causes?: Array<{ reason?: string; message?: string }> } };
  try {
    st = JSON.parse(text);
  } catch {
    return { exitCode: null, message: text };
  }
  if (st.status === "Success") return { exitCode: 0, message: "" };
  const cause = st.details?.causes?.find((c) => c.reason === "ExitCode");
  const code = cause?.message !== undefined ? Number(cause.message) : NaN;
  return { exitCode: Number.isInteger(code) ? code : null, message: st.message ?? st.reason ?? text };
}

async function readAll(r: ReadableStream<Uint8Array>): Promise<string> {
  const dec = new TextDecoder();
  let s = "";
  const rd = r.getReader();
  for (;;) {
    const { value, done } = await rd.read();
    if (done) return s + dec.decode();
    s += dec.decode(value, { stream: true });
  }
}

/**
 * Opens the streams of an exec on a session that the gateway upgraded for
 * execPath(t): error, then stdin, stdout, stderr or resize, as client-go does.
 */
export async function startExec(s: Session, t: ExecTarget): Promise<Exec> {
  const open = (type: string): Promise<Stream> => s.open({ streamtype: type });
  const errStream = await open("error");
  const stdin = t.stdin ? await open("stdin") : null;
  const stdout = await open("stdout");
  const stderr = t.tty ? null : await open("stderr");
  const resize = t.tty ? await open("resize") : null;
  // Nothing is sent on error and stdout.
  await errStream.writable.close().catch(() => {});
  await stdout.writable.close().catch(() => {});
  if (stderr) await stderr.writable.close().catch(() => {});
  const rw = resize?.writable.getWriter();
  let last = "";
  return {
    stdin: stdin ? (stdin.writable as WritableStream<Uint8Array | string>) : null,
    stdout: stdout.readable,
    stderr: stderr ? stderr.readable : null,
    async resize(cols: number, rows: number) {
      if (!rw) return;
      const m = JSON.stringify({ Width: cols, Height: rows });
      if (m === last) return;
      last = m;
      await rw.write(m);
    },
    status: readAll(errStream.readable).then(parseExecStatus),
  };
}
