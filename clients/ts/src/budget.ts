// Abuse budgets of spec section 11: fixed windows of 10 s and the PING token bucket.

/** Counts events in fixed windows; hit() is false once more than limit fell in one window. */
export class WindowBudget {
  private count = 0;
  private start = 0;
  constructor(
    readonly limit: number,
    readonly windowMs: number,
    private readonly now: () => number,
  ) {}
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

/** A token bucket: burst tokens, refilled at rate per second. */
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
