// The session's flow control (spec 8): the credit the peer granted this
// endpoint for DATA (8.2), with the writes waiting for more of it, and the
// window this endpoint grants the peer (8.3, 8.4), which grows as the
// application keeps up and stays at least twice the largest stream window
// (8.5). Each stream keeps its own windows (stream.ts). Internal: index.ts
// exports none of it.

import { ErrorCode, ProtocolViolation } from "./errors.js";
import { DEFAULT_SETTINGS, MAX_U31 } from "./frame.js";
import { RecvWindow } from "./window.js";

/** @internal */
export class SessionFlow {
  /** DATA bytes this endpoint may send (the peer's session window). */
  sendCredit = DEFAULT_SETTINGS.initialSessionWindow;
  private waiters: Array<() => void> = [];
  private waitStart = -1; // when a write began to wait for credit, since the last session WINDOW_UPDATE
  private recvAvail: number; // DATA bytes the peer may send
  private readonly rwin: RecvWindow;

  /** window: the session window this endpoint announced; maxWindow: how far it may grow. */
  constructor(
    window: number,
    maxWindow: number,
    private readonly now: () => number,
  ) {
    this.recvAvail = window;
    this.rwin = new RecvWindow(window, maxWindow);
  }

  // --- sending ------------------------------------------------------------

  /** Resolves at the next session WINDOW_UPDATE or wake(). */
  waitCredit(): Promise<void> {
    if (this.waitStart < 0) this.waitStart = this.now();
    return new Promise((res) => this.waiters.push(res));
  }

  /** The peer's session WINDOW_UPDATE of n. */
  addCredit(n: number): void {
    if (this.sendCredit + n > MAX_U31) throw new ProtocolViolation(ErrorCode.FLOW_CONTROL_ERROR, "session credit over 2^31-1");
    this.sendCredit += n;
    this.waitStart = -1;
    this.wake();
  }

  /** The writes waiting go on (to look at the credit, or at the session's end). */
  wake(): void {
    const ws = this.waiters;
    this.waiters = [];
    for (const w of ws) w();
  }

  /** Since when writes have waited for credit with no session WINDOW_UPDATE, or -1 when none waits (9.6). */
  stalledSince(): number {
    return this.waiters.length > 0 ? this.waitStart : -1;
  }

  // --- receiving ----------------------------------------------------------

  /** DATA of n bytes arrived: beyond the window it is a FLOW_CONTROL_ERROR. */
  receive(n: number): void {
    if (n > this.recvAvail) throw new ProtocolViolation(ErrorCode.FLOW_CONTROL_ERROR, `DATA of ${n} bytes beyond the session window (${this.recvAvail} left)`);
    this.recvAvail -= n;
  }

  /** n bytes left a stream's buffer at now (RecvWindow.consume); returns the session WINDOW_UPDATE due, or 0. */
  consume(n: number, now: number, rtt: number): number {
    return this.grant(this.rwin.consume(n, now, rtt));
  }

  /** A stream window grew to w: the session's follows to 2w; returns the session WINDOW_UPDATE due, or 0. */
  follow(w: number): number {
    return this.grant(this.rwin.raise(2 * w));
  }

  private grant(d: number): number {
    this.recvAvail += d;
    return d;
  }
}
