// The web terminal of `wsmux gateway` (served at /ui/): xterm.js on an exec
// session with a TTY, carried by WSMUX/1 from the browser through the gateway.
// The token is asked once and kept in this module's memory only.
import { Terminal } from "@xterm/xterm";
import { FitAddon } from "@xterm/addon-fit";
import * as wsmux from "../src/index.js";

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const statusEl = $<HTMLSpanElement>("status");
const tokenInput = $<HTMLInputElement>("token");
const tokenLabel = $<HTMLLabelElement>("token-label");
const button = $<HTMLButtonElement>("connect");

let token: string | null = null;
let session: wsmux.Session | null = null;
let exitCode: number | null = null;

const term = new Terminal({ cursorBlink: true, scrollback: 5000, fontFamily: "DejaVu Sans Mono, monospace", fontSize: 14 });
const fit = new FitAddon();
term.loadAddon(fit);
term.open($("terminal"));
fit.fit();
addEventListener("resize", () => fit.fit());

function status(text: string, cls: "" | "ok" | "error" = ""): void {
  statusEl.textContent = text;
  statusEl.className = cls;
}

function askToken(why: string): void {
  token = null;
  tokenLabel.hidden = false;
  tokenInput.focus();
  status(why, "error");
}

/** The pod GET answers 401 for a bad token: a WebSocket handshake would tell the page nothing. */
async function preflight(ns: string, pod: string): Promise<boolean> {
  let r: Response;
  try {
    r = await fetch(`/api/v1/namespaces/${encodeURIComponent(ns)}/pods/${encodeURIComponent(pod)}`, {
      headers: { Authorization: `Bearer ${token}` },
      cache: "no-store",
    });
  } catch (e) {
    status(`cannot reach the gateway: ${(e as Error).message}`, "error");
    return false;
  }
  if (r.ok) return true;
  const body = (await r.text()).trim();
  let msg = body;
  try {
    msg = JSON.parse(body).message ?? body;
  } catch {
    // plain text
  }
  if (r.status === 401) askToken(`401 Unauthorized: ${msg}. Enter a valid token.`);
  else status(`${r.status} ${r.statusText}: ${msg}`, "error");
  return false;
}

async function connect(): Promise<void> {
  const ns = $<HTMLInputElement>("namespace").value.trim();
  const pod = $<HTMLInputElement>("pod").value.trim();
  const container = $<HTMLInputElement>("container").value.trim() || undefined;
  const command = $<HTMLInputElement>("command").value.trim().split(/\s+/);
  session?.abort(wsmux.ErrorCode.CANCEL, "reconnecting");
  session = null;
  exitCode = null;
  button.disabled = true;
  status("connecting…");
  try {
    if (!(await preflight(ns, pod))) return;
    tokenLabel.hidden = true;
    const target = { namespace: ns, pod, container, command, stdin: true, tty: true };
    const url = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${wsmux.execPath(target)}`;
    const s = await wsmux.connect(url, {
      token: token!,
      protocols: wsmux.streamProtocolOffer(),
      initialStreamWindow: 1 << 20,
      initialSessionWindow: 4 << 20,
    });
    session = s;
    button.textContent = "Reconnect";
    const ex = await wsmux.startExec(s, target);
    term.reset();
    fit.fit();
    await ex.resize(term.cols, term.rows);
    status(`connected: ${ns}/${pod} ${command.join(" ")}`, "ok");
    const stdin = ex.stdin!.getWriter();
    const onData = term.onData((d) => {
      stdin.write(d).catch(() => {});
    });
    const onResize = term.onResize(({ cols, rows }) => {
      ex.resize(cols, rows).catch(() => {});
    });
    term.focus();
    // Output: the next read waits until xterm has parsed the last chunk, so a
    // flood of output holds the stream's credit instead of the page's memory.
    const out = ex.stdout.getReader();
    const pump = (async () => {
      for (;;) {
        const { value, done } = await out.read();
        if (done) return;
        await new Promise<void>((res) => term.write(value, res));
      }
    })().catch(() => {});
    const st = await ex.status.catch((e: Error) => ({ exitCode: null, message: e.message }));
    // The status travels on its own stream: let the output's last bytes land first.
    await Promise.race([pump, new Promise((res) => setTimeout(res, 2000))]);
    onData.dispose();
    onResize.dispose();
    exitCode = st.exitCode;
    const what = st.exitCode !== null ? `exited with status ${st.exitCode}` : `ended: ${st.message}`;
    term.write(`\r\n\x1b[2m[${what}]\x1b[0m\r\n`);
    status(what, st.exitCode === 0 ? "ok" : "error");
    void s.close();
  } catch (e) {
    const err = e as wsmux.WsmuxError;
    status(`connection failed: ${err.message}`, "error");
  } finally {
    button.disabled = false;
  }
}

$<HTMLFormElement>("target").addEventListener("submit", (ev) => {
  ev.preventDefault();
  if (token === null) {
    const t = tokenInput.value.trim();
    tokenInput.value = "";
    if (!t) {
      askToken("enter a token");
      return;
    }
    token = t;
  }
  void connect();
});

// For the browser tests (gateway/webui) and the curious: the
// terminal and the client library; never the token.
Object.assign(globalThis, { wsmuxUI: { term, lib: wsmux, exitCode: () => exitCode, session: () => session } });
