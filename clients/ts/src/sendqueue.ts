// The session's send queue: the frames waiting for the next flush (control
// frames go ahead of the ordered ones), packed into as few WebSocket
// messages as the peer's MAX_MESSAGE_SIZE allows, and the progress of those
// bytes out of the WebSocket's send buffer (spec 9.6). Internal: index.ts
// exports none of it.

import { HEADER_LEN } from "./frame.js";
import type { WebSocketLike } from "./options.js";
import type { Part } from "./wire.js";

/** @internal */
export class SendQueue {
  private ctrl: Part[] = [];
  private ordered: Part[] = [];
  private sentTotal = 0; // message bytes handed to ws.send
  private sentOut = 0; // of those, what had left the WebSocket's buffer at the last progress
  private sendProgress: number; // when that last grew (or nothing was buffered)

  constructor(
    private readonly ws: WebSocketLike,
    now: number,
  ) {
    this.sendProgress = now;
  }

  /** Queues a control frame: it goes out ahead of the ordered ones. */
  pushCtrl(b: Part): void {
    this.ctrl.push(b);
  }

  /** Queues a frame that keeps its place among the ordered ones (a stream's frames). */
  pushOrdered(b: Part): void {
    this.ordered.push(b);
  }

  /** Drops everything queued. */
  clear(): void {
    this.ctrl = [];
    this.ordered = [];
  }

  get empty(): boolean {
    return this.ctrl.length === 0 && this.ordered.length === 0;
  }

  /**
   * Sends everything queued, in messages of at most max bytes. When a
   * ws.send throws, the rest is dropped and what it threw comes back (in
   * a box: anything can be thrown); else null.
   */
  write(max: number): { thrown: unknown } | null {
    const parts = this.ctrl.length ? this.ctrl.concat(this.ordered) : this.ordered;
    this.ctrl = [];
    this.ordered = [];
    let i = 0;
    while (i < parts.length) {
      let size = 0, j = i;
      while (j < parts.length && size + parts[j].length <= max) size += parts[j++].length;
      const only = parts[i];
      let msg: Uint8Array;
      if (j === i + 1 && only instanceof Uint8Array) msg = only;
      else {
        msg = new Uint8Array(size);
        let off = 0;
        for (let k = i; k < j; k++) {
          const x = parts[k];
          if (x instanceof Uint8Array) msg.set(x, off);
          else {
            msg.set(x.h, off);
            msg.set(x.p, off + HEADER_LEN);
          }
          off += x.length;
        }
      }
      try {
        this.ws.send(msg);
        this.sentTotal += msg.length;
      } catch (e) {
        return { thrown: e };
      }
      i = j;
    }
    return null;
  }

  /**
   * Notes at t what has left the WebSocket's send buffer; returns how many
   * bytes it holds when none left it for ms or more (ms > 0), else 0.
   */
  stuck(t: number, ms: number): number {
    // Progress: bytes leaving the WebSocket's send buffer (a buffer that
    // grows while it drains is progress too).
    const buffered = this.ws.bufferedAmount ?? 0;
    const out = this.sentTotal - buffered;
    if (buffered === 0 || out > this.sentOut) this.sendProgress = t;
    this.sentOut = Math.max(this.sentOut, out);
    return ms > 0 && buffered > 0 && t - this.sendProgress >= ms ? buffered : 0;
  }
}
