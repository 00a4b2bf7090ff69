// The session's liveness (spec 9): its PING and the RTT it measures (9.1),
// the keepalive PING after silence on the send side (9.2), and the timeouts
// a periodic tick checks (9.6): nothing received, a connection that takes
// no bytes, a session window the peer keeps at zero. Internal: index.ts
// exports none of it.

import { ErrorCode, ProtocolViolation } from "./errors.js";
import type { SessionOptions } from "./options.js";

/** @internal What Liveness needs of its session. */
export interface LivenessHost {
  now(): number;
  /** Queues PING(arg) (not an ACK). */
  sendPing(arg: number): void;
  /** Whether the peer's SETTINGS arrived (no keepalive PING before). */
  hasPeerSettings(): boolean;
  /** Bytes the WebSocket's send buffer holds when none left it for ms, else 0 (SendQueue.stuck). */
  stuck(t: number, ms: number): number;
  /** Since when a write has waited for session credit, or -1 when none waits. */
  creditStalledSince(): number;
  /** The outstanding PING was answered after rtt ms. */
  measured(rtt: number): void;
  /** Ends the session with a session error (9.5). */
  fail(e: ProtocolViolation): void;
}

/** @internal */
export class Liveness {
  private pingSeq = 0;
  private pingOut: { arg: number; sent: number; resolve: (ms: number) => void; reject: (e: Error) => void; p: Promise<number> } | null = null;
  private lastRecv: number;
  private lastSent: number;
  private timer: ReturnType<typeof setInterval> | null = null;

  /** now: when the session began (nothing received or sent yet). */
  constructor(
    now: number,
    private readonly host: LivenessHost,
  ) {
    this.lastRecv = this.lastSent = now;
  }

  /** Starts the periodic checks with the timeouts of opts. */
  start(opts: SessionOptions): void {
    const ka = opts.keepaliveMs ?? 15000;
    const kt = opts.keepaliveTimeoutMs ?? 45000;
    const stall = opts.stallTimeoutMs ?? 120000;
    const wt = opts.writeTimeoutMs ?? 30000;
    const periods = [ka, kt, stall, wt].filter((v) => v > 0);
    if (periods.length > 0) {
      const tick = Math.max(50, Math.min(...periods) / 3);
      this.timer = setInterval(() => this.onTick(ka, kt, stall, wt), tick);
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  /** A message arrived: every one counts, whatever it holds (9.2). */
  received(): void {
    this.lastRecv = this.host.now();
  }

  /** Messages went out. */
  sent(): void {
    this.lastSent = this.host.now();
  }

  /** Sends a PING unless one is out already, and resolves with its RTT in ms. */
  ping(): Promise<number> {
    if (this.pingOut) return this.pingOut.p;
    const arg = (this.pingSeq = (this.pingSeq + 1) >>> 0);
    let resolve!: (ms: number) => void, reject!: (e: Error) => void;
    const p = new Promise<number>((res, rej) => {
      resolve = res;
      reject = rej;
    });
    this.pingOut = { arg, sent: this.host.now(), resolve, reject, p };
    this.host.sendPing(arg);
    return p;
  }

  /** A PING ACK with arg arrived: false when it answers no PING of ours (unsolicited). */
  pong(arg: number): boolean {
    const p = this.pingOut;
    if (!p || p.arg !== arg) return false;
    this.pingOut = null;
    const rtt = Math.max(0, this.host.now() - p.sent);
    this.host.measured(rtt);
    p.resolve(rtt);
    return true;
  }

  /** The session ended: the tick stops, the outstanding PING rejects with err. */
  close(err: Error): void {
    if (this.timer) clearInterval(this.timer);
    this.pingOut?.reject(err);
    this.pingOut = null;
  }

  private onTick(ka: number, kt: number, stall: number, wt: number): void {
    const t = this.host.now();
    const buffered = this.host.stuck(t, wt);
    if (buffered > 0) {
      this.host.fail(new ProtocolViolation(ErrorCode.STALL_TIMEOUT, `the connection took none of ${buffered} queued bytes for ${wt} ms`));
      return;
    }
    if (kt > 0 && t - this.lastRecv >= kt) {
      this.host.fail(new ProtocolViolation(ErrorCode.KEEPALIVE_TIMEOUT, `nothing received for ${kt} ms`));
      return;
    }
    const stalledSince = this.host.creditStalledSince();
    if (stall > 0 && stalledSince >= 0 && t - stalledSince >= stall) {
      this.host.fail(new ProtocolViolation(ErrorCode.STALL_TIMEOUT, `the peer kept the session window at zero with data queued for ${stall} ms`));
      return;
    }
    if (ka > 0 && t - this.lastSent >= ka && this.host.hasPeerSettings() && !this.pingOut) this.ping().catch(() => {});
  }
}
