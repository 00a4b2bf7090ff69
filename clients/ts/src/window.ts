// The receive side of one window (a stream's or the session's): when credit
// goes back, and how the window grows. The rule is the Go library's
// (flow.Receiver), which is quic-go's: an update is due once a quarter of
// the window was consumed; at an update, if more than half of the window
// was read in the current epoch and the epoch took less than
// 4 x (read / window) x RTT, the window doubles (up to its maximum). The
// growth is announced with the update. Bytes the application never reads
// (discarded) are credited back but never make the window grow.

/** @internal */
export class RecvWindow {
  /** Current window: what the peer may have in flight at most. */
  window: number;
  private pending = 0; // consumed (or grown), not yet announced
  private epochStart = -1;
  private epochRead = 0;

  constructor(
    initial: number,
    private readonly max: number,
  ) {
    this.window = initial;
  }

  /**
   * n bytes left the buffer at now (ms): read by the application when rtt
   * (ms) is given (> 0: known), discarded when it is 0. Returns the
   * WINDOW_UPDATE increment due now, or 0.
   */
  consume(n: number, now: number, rtt: number): number {
    if (n <= 0) return 0;
    this.pending += n;
    if (rtt > 0) {
      if (this.epochStart < 0) this.epochStart = now;
      this.epochRead += n;
    }
    if (4 * this.pending < this.window) return 0;
    if (rtt > 0 && 2 * this.epochRead > this.window) {
      if (Math.max(0, now - this.epochStart) * this.window < 4 * this.epochRead * rtt) {
        const g = Math.min(2 * this.window, this.max) - this.window;
        if (g > 0) {
          this.window += g;
          this.pending += g;
        }
      }
      this.epochStart = now;
      this.epochRead = 0;
    }
    return this.flush();
  }

  /** Raises the window to at least to (capped at the maximum); returns the increment to announce now, or 0. */
  raise(to: number): number {
    const g = Math.min(to, this.max) - this.window;
    if (g <= 0) return 0;
    this.window += g;
    this.pending += g;
    return this.flush();
  }

  private flush(): number {
    const d = this.pending;
    this.pending = 0;
    return d;
  }
}
