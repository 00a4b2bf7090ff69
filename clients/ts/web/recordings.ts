// The replay page of `wsmux gateway` (served at /ui/recordings/): lists the
// session recordings the gateway keeps (--recording-dir), filtered by
// caller, pod and time, and plays one with asciinema-player. The gateway
// answers only the callers its recording policy lets audit; the token is
// asked once and kept in this module's memory only.
import * as AsciinemaPlayer from "asciinema-player";
import { forPlayer } from "./cast.js";

const API = "/ui/recordings/api/";
const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const statusEl = $<HTMLSpanElement>("status");
const tokenInput = $<HTMLInputElement>("token");
const tokenLabel = $<HTMLLabelElement>("token-label");
const table = $<HTMLTableElement>("list");
const meta = $<HTMLPreElement>("meta");

let token: string | null = null;
let player: AsciinemaPlayer.Player | null = null;

interface Meta {
  id: string;
  kind: string;
  caller: string;
  user?: string;
  groups?: string[];
  cluster?: string;
  namespace: string;
  pod: string;
  container?: string;
  command?: string[];
  tty: boolean;
  stdin_recorded: boolean;
  start: string;
}
interface Entry {
  name: string;
  meta: Meta;
  size: number;
}

function status(text: string, cls: "" | "ok" | "error" = ""): void {
  statusEl.textContent = text;
  statusEl.className = cls;
}

async function api(path: string): Promise<Response | null> {
  let r: Response;
  try {
    r = await fetch(API + path, { headers: { Authorization: `Bearer ${token}` }, cache: "no-store" });
  } catch (e) {
    status(`cannot reach the gateway: ${(e as Error).message}`, "error");
    return null;
  }
  if (r.ok) return r;
  const body = (await r.text()).trim();
  let msg = body;
  try {
    msg = JSON.parse(body).message ?? body;
  } catch {
    // plain text
  }
  if (r.status === 401) {
    token = null;
    tokenLabel.hidden = false;
    tokenInput.focus();
  }
  status(`${r.status} ${r.statusText}: ${msg}`, "error");
  return null;
}

function localToRFC3339(v: string): string {
  return v ? new Date(v).toISOString().replace(/\.\d+Z$/, "Z") : "";
}

async function list(): Promise<void> {
  const q = new URLSearchParams();
  for (const [k, v] of [
    ["caller", $<HTMLInputElement>("caller").value.trim()],
    ["pod", $<HTMLInputElement>("pod").value.trim()],
    ["since", localToRFC3339($<HTMLInputElement>("since").value)],
    ["until", localToRFC3339($<HTMLInputElement>("until").value)],
  ]) {
    if (v) q.set(k, v);
  }
  status("listing…");
  const r = await api("list?" + q.toString());
  if (!r) return;
  tokenLabel.hidden = true;
  const { recordings } = (await r.json()) as { recordings: Entry[] };
  const body = table.tBodies[0];
  body.replaceChildren();
  for (const e of recordings) {
    const tr = body.insertRow();
    tr.dataset.name = e.name;
    const m = e.meta;
    for (const v of [m.start.replace("T", " ").replace(/\.\d+Z$|Z$/, ""), m.caller, m.user ?? "", `${m.namespace}/${m.pod}${m.container ? ` (${m.container})` : ""}`, m.kind, (m.command ?? []).join(" "), `${(e.size / 1024).toFixed(1)} KiB`]) {
      tr.insertCell().textContent = v;
    }
    tr.addEventListener("click", () => {
      for (const o of Array.from(body.rows)) o.classList.remove("selected");
      tr.classList.add("selected");
      void play(e);
    });
  }
  table.hidden = false;
  status(`${recordings.length} recording${recordings.length === 1 ? "" : "s"}`, "ok");
}

async function play(e: Entry): Promise<void> {
  player?.dispose();
  player = null;
  const m = e.meta;
  meta.textContent = `${m.kind} by ${m.user ?? ""} (${m.caller}${m.groups?.length ? `, groups ${m.groups.join(",")}` : ""}) in ${m.cluster ?? ""} ${m.namespace}/${m.pod}${m.container ? ` container ${m.container}` : ""}: ${(m.command ?? []).join(" ")}; started ${m.start}; stdin ${m.stdin_recorded ? "recorded" : "not recorded"}`;
  $("details").hidden = false;
  status(`loading ${e.name}…`);
  const r = await api("cast/" + encodeURIComponent(e.name));
  if (!r) return;
  const text = await r.text();
  if (m.kind === "portforward") {
    meta.textContent += "\n" + text;
    status("a port-forward: its record, no playback", "ok");
    return;
  }
  const p = AsciinemaPlayer.create({ data: forPlayer(text) }, $("player"), { autoPlay: true, idleTimeLimit: 1, fit: "width", terminalFontFamily: "DejaVu Sans Mono, monospace" });
  player = p;
  p.addEventListener("playing", () => player === p && status(`playing ${e.name}`, "ok"));
  p.addEventListener("ended", () => player === p && status(`playback ended: ${e.name}`, "ok"));
}

$<HTMLFormElement>("filters").addEventListener("submit", (ev) => {
  ev.preventDefault();
  if (!token) {
    token = tokenInput.value;
    tokenInput.value = "";
  }
  if (!token) {
    status("enter a token first", "error");
    return;
  }
  void list();
});

/** The player's screen as text, a line per row, trailing blanks trimmed. */
function screen(): string[] {
  return Array.from(document.querySelectorAll("#player .ap-line")).map((row) => {
    // A row is spans of text placed at their column (--offset).
    let line = "";
    for (const span of Array.from(row.children) as HTMLElement[]) {
      const col = Number.parseInt(span.style.getPropertyValue("--offset"), 10) || 0;
      line = line.padEnd(col) + (span.textContent ?? "");
    }
    return line.replace(/\s+$/, "");
  });
}

// For scripts and the browser tests.
Object.assign(globalThis, { wsmuxReplay: { player: () => player, screen } });
