// Abuse budgets of spec section 11: fixed windows of 10 s and the PING token bucket.

import { ErrorCode, ProtocolViolation } from "./errors.js";

/**
 * Counts events in fixed windows (spec 11): the first from the session's
 * start (construction), each later one from the first event windowMs or more
 * after the current one began. hit() is false once more than limit fell in
 * one window: the limit-th event is allowed, the next one is not.
 */
export class WindowBudget {
  private count = 0;
  private start: number;
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly now: () => number,
  ) {
    this.start = now();
  }
  /** Counts one event; false when the budget is exceeded. */
  hit(): boolean {
    const t = this.now();
    if (t - this.start >= this.windowMs) {
      this.start = t;
      this.count = 0;
    }
    return ++this.count <= this.limit;
  }
}

/** A token bucket (spec 11): burst tokens, full at construction, refilled continuously at rate per second; take() fails below one token. */
export class TokenBucket {
  private tokens: number;
  private last: number;
  constructor(
    readonly burst: number,
    readonly ratePerSec: number,
    private readonly now: () => number,
  ) {
    this.tokens = burst;
    this.last = now();
  }
  /** Takes a token; false when none is left. */
  take(): boolean {
    const t = this.now();
    this.tokens = Math.min(this.burst, this.tokens + ((t - this.last) * this.ratePerSec) / 1000);
    this.last = t;
    if (this.tokens < 1) return false;
    this.tokens -= 1;
    return true;
  }
}

/** @internal A session's budgets against its peer (spec 11): each counts one event, and throws ENHANCE_YOUR_CALM once spent. */
export class Budgets {
  private readonly pings: TokenBucket;
  private readonly uselessFrames: WindowBudget;
  private readonly resets: WindowBudget;

  constructor(now: () => number) {
    this.pings = new TokenBucket(50, 10, now);
    this.uselessFrames = new WindowBudget(1000, 10000, now);
    this.resets = new WindowBudget(200, 10000, now);
  }

  /** A PING to answer. */
  pingHit(): void {
    if (!this.pings.take()) throw new ProtocolViolation(ErrorCode.ENHANCE_YOUR_CALM, "PING flood");
  }

  /** A frame that changes nothing (what it was). */
  useless(what: string): void {
    if (!this.uselessFrames.hit()) throw new ProtocolViolation(ErrorCode.ENHANCE_YOUR_CALM, `too many useless frames (${what})`);
  }

  /** A reset the peer caused (what caused it). */
  resetHit(what: string): void {
    if (!this.resets.hit()) throw new ProtocolViolation(ErrorCode.ENHANCE_YOUR_CALM, `too many resets (${what})`);
  }
}
