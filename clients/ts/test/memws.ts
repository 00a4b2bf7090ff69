// An in-memory pair of WebSocket-like endpoints for unit tests: messages are
// delivered in order on later tasks, close events reach both sides.
import type { WebSocketLike } from "../src/index.js";

type L = (ev: any) => void;

export class MemWS implements WebSocketLike {
  binaryType = "arraybuffer";
  protocol = "wsmux.v1";
  readyState = 1;
  peer!: MemWS;
  sent: Uint8Array[] = [];
  closedWith: number | null = null;
  private ls: Record<string, L[]> = { message: [], close: [], error: [] };
  addEventListener(t: string, l: L): void {
    this.ls[t].push(l);
  }
  emit(t: string, ev: unknown): void {
    for (const l of this.ls[t]) l(ev);
  }
  send(data: Uint8Array): void {
    if (this.readyState !== 1) return;
    const copy = data.slice().buffer;
    this.sent.push(new Uint8Array(copy));
    const p = this.peer;
    setImmediate(() => p.readyState === 1 && p.emit("message", { data: copy }));
  }
  /** Raw bytes from the test, as if the peer sent them. */
  inject(b: Uint8Array | string): void {
    const d = typeof b === "string" ? b : b.slice().buffer;
    setImmediate(() => this.emit("message", { data: d }));
  }
  close(code = 1005): void {
    if (this.readyState !== 1) return;
    this.closedWith = code;
    this.readyState = 3;
    const p = this.peer;
    setImmediate(() => {
      this.emit("close", { code, reason: "" });
      if (p.readyState === 1) {
        p.readyState = 3;
        p.emit("close", { code, reason: "" });
      }
    });
  }
}

export function pair(): [MemWS, MemWS] {
  const a = new MemWS(), b = new MemWS();
  a.peer = b;
  b.peer = a;
  return [a, b];
}
