// The headless-Chromium tests of the web terminal and of the TS client in a
// page, driven by the Go test gateway/webui (which starts the
// gateway, a stand-in cluster and a Go mux echo server):
//   node dist/test/tools/browser.js BASE_URL TOKEN OUT_DIR
// BASE_URL serves /ui/ (the terminal, before the gateway) and /test/mux (a Go
// mux server that echoes every stream). Prints one JSON line per check
// ({"name","ok","error","detail"}) and writes screenshots to OUT_DIR.
import { createHash } from "node:crypto";
import { join } from "node:path";
import puppeteer, { type Page } from "puppeteer-core";

const [base, token, outDir] = process.argv.slice(2);
const chromium = process.env.CHROMIUM ?? "/usr/bin/chromium";

type UI = {
  wsmuxUI: {
    term: {
      buffer: { active: { length: number; getLine(i: number): { translateToString(trim: boolean): string } | undefined } };
      rows: number;
      cols: number;
      paste(s: string): void;
      input(s: string): void;
    };
    lib: typeof import("../../src/index.js");
    exitCode(): number | null;
  };
};

/** The prompt of sh (trailing blanks trimmed) on a line of its own. */
const PROMPT = /^[#$]\s*$/;

function report(name: string, ok: boolean, detail: unknown = "", error = ""): void {
  console.log(JSON.stringify({ name, ok, detail, error }));
}

async function screen(page: Page): Promise<string[]> {
  return page.evaluate(() => {
    const b = (globalThis as unknown as UI).wsmuxUI.term.buffer.active;
    const out: string[] = [];
    for (let i = 0; i < b.length; i++) out.push(b.getLine(i)?.translateToString(true) ?? "");
    return out;
  });
}

/** Waits until a line of the terminal matches re; returns the match. */
async function waitLine(page: Page, re: RegExp, what: string, timeoutMs = 20000): Promise<RegExpMatchArray> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    for (const l of await screen(page)) {
      const m = l.match(re);
      if (m) return m;
    }
    if (Date.now() > deadline) throw new Error(`no line matching ${re} (${what}); screen:\n${(await screen(page)).filter((x) => x).slice(-15).join("\n")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function status(page: Page): Promise<string> {
  return page.$eval("#status", (e) => e.textContent ?? "");
}

async function waitStatus(page: Page, re: RegExp, timeoutMs = 20000): Promise<string> {
  await page.waitForFunction((src: string) => new RegExp(src).test(document.getElementById("status")?.textContent ?? ""), { timeout: timeoutMs, polling: 50 }, re.source).catch(async () => {
    throw new Error(`status ${JSON.stringify(await status(page))}, want ${re}`);
  });
  return status(page);
}

async function login(page: Page, tok: string): Promise<void> {
  await page.goto(base + "/ui/", { waitUntil: "load" });
  await page.type("#token", tok);
  await page.click("#connect");
}

/** Runs a shell command line in the terminal by typing it. */
async function run(page: Page, line: string): Promise<void> {
  await page.keyboard.type(line);
  await page.keyboard.press("Enter");
}

async function check(name: string, page: Page | null, fn: () => Promise<unknown>): Promise<void> {
  try {
    report(name, true, (await fn()) ?? "");
  } catch (e) {
    if (page) await page.screenshot({ path: join(outDir, `${name.replace(/\W+/g, "-")}-failed.png`) }).catch(() => {});
    report(name, false, "", String((e as Error)?.stack ?? e));
  }
}

async function main() {
  const browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
    // By hand against `wsmux demo`, whose certificate is its own.
    acceptInsecureCerts: true,
    defaultViewport: { width: 1000, height: 640 },
  });
  try {
    const page = await browser.newPage();
    const consoleErrors: string[] = [];
    page.on("pageerror", (e) => consoleErrors.push(String(e)));

    await check("terminal/echo-hello", page, async () => {
      await login(page, token);
      await waitStatus(page, /^connected/);
      await page.click("#terminal");
      await waitLine(page, PROMPT, "the shell's prompt"); // typed before it, the tty's echo comes first
      await run(page, "echo hello");
      await waitLine(page, /^hello$/, "echo hello");
      await page.screenshot({ path: join(outDir, "terminal.png") });
    });

    await check("terminal/resize-stty-size", page, async () => {
      await run(page, "stty size");
      const a = await waitLine(page, /^(\d+) (\d+)$/, "stty size");
      const before = await page.evaluate(() => [(globalThis as unknown as UI).wsmuxUI.term.rows, (globalThis as unknown as UI).wsmuxUI.term.cols]);
      if (Number(a[1]) !== before[0] || Number(a[2]) !== before[1]) throw new Error(`stty size ${a[0]}, terminal ${before}`);
      await page.setViewport({ width: 700, height: 420 });
      await page.waitForFunction((r: number) => (globalThis as unknown as UI).wsmuxUI.term.rows !== r, { polling: 50, timeout: 10000 }, before[0]);
      const after = await page.evaluate(() => [(globalThis as unknown as UI).wsmuxUI.term.rows, (globalThis as unknown as UI).wsmuxUI.term.cols]);
      // The size travels on the resize stream, the command on stdin: two streams, so
      // a command typed at once may still run at the old size. Ask again until it shows.
      const want = new RegExp(`^${after[0]} ${after[1]}$`);
      for (let i = 0; ; i++) {
        await run(page, "stty size");
        try {
          await waitLine(page, want, "stty size after the resize", 1000);
          break;
        } catch (e) {
          if (i === 20) throw e;
        }
      }
      return `stty size ${before[0]} ${before[1]} -> ${after[0]} ${after[1]}`;
    });

    await check("terminal/ctrl-c", page, async () => {
      await run(page, "echo sle''eping; sleep 1000");
      await waitLine(page, /^sleeping$/, "sleep started");
      await page.keyboard.down("Control");
      await page.keyboard.press("c");
      await page.keyboard.up("Control");
      await run(page, "echo after$((40+2))");
      await waitLine(page, /^after42$/, "a command after Ctrl-C ended sleep");
    });

    await check("terminal/paste-1MiB", page, async () => {
      // 1 MiB of lines of 63 characters; the pty's line discipline needs lines under 4 KiB.
      const line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-";
      const lines = Math.ceil((1 << 20) / 64);
      let text = "";
      for (let i = 0; i < lines; i++) text += line.slice(0, 58) + String(i).padStart(5, "0") + "\n";
      text = text.slice(0, 1 << 20);
      text = text.slice(0, text.lastIndexOf("\n") + 1);
      const want = createHash("sha256").update(text).digest("hex");
      await run(page, "stty -echo; echo rea''dy; sha256sum; stty echo");
      await waitLine(page, /^ready$/, "sha256sum about to read");
      // Responsiveness: the longest gap between 10 ms timer ticks of the page while the paste goes through.
      await page.evaluate(() => {
        const g = globalThis as unknown as { gap: number; last: number; tick: ReturnType<typeof setInterval> };
        g.gap = 0;
        g.last = performance.now();
        g.tick = setInterval(() => {
          const t = performance.now();
          g.gap = Math.max(g.gap, t - g.last);
          g.last = t;
        }, 10);
      });
      const t0 = Date.now();
      await page.evaluate((s: string) => (globalThis as unknown as UI).wsmuxUI.term.paste(s), text);
      await page.evaluate(() => (globalThis as unknown as UI).wsmuxUI.term.input("\x04"));
      await waitLine(page, new RegExp(`^${want}  -$`), "sha256 of the pasted MiB", 60000);
      const ms = Date.now() - t0;
      const gap = await page.evaluate(() => {
        const g = globalThis as unknown as { gap: number; tick: ReturnType<typeof setInterval> };
        clearInterval(g.tick);
        return g.gap;
      });
      return `${text.length} bytes, sha256 ${want.slice(0, 16)}..., ${ms} ms, longest gap between page timer ticks ${gap.toFixed(0)} ms`;
    });

    await check("terminal/exit-3", page, async () => {
      await run(page, "exit 3");
      await waitStatus(page, /exited with status 3/);
      await waitLine(page, /\[exited with status 3\]/, "the exit status in the terminal");
      const code = await page.evaluate(() => (globalThis as unknown as UI).wsmuxUI.exitCode());
      if (code !== 3) throw new Error(`exit code ${code}`);
      await page.screenshot({ path: join(outDir, "terminal-exit.png") });
    });

    await check("terminal/reconnect", page, async () => {
      const label = await page.$eval("#connect", (e) => e.textContent);
      if (label !== "Reconnect") throw new Error(`button says ${label}`);
      await page.click("#connect"); // the token is still in the page's memory: not asked again
      await waitStatus(page, /^connected/);
      await page.click("#terminal");
      await waitLine(page, PROMPT, "the shell's prompt");
      await run(page, "echo again$((1+1))");
      await waitLine(page, /^again2$/, "a command after reconnecting");
    });

    await check("terminal/wrong-token-401", null, async () => {
      const ctx = await browser.createBrowserContext();
      const p2 = await ctx.newPage();
      try {
        await login(p2, "not-the-token");
        const s = await waitStatus(p2, /401/);
        const visible = await p2.$eval("#token-label", (e) => !(e as HTMLElement).hidden);
        if (!visible) throw new Error("the token field is not offered again");
        await p2.screenshot({ path: join(outDir, "wrong-token.png") });
        return s;
      } finally {
        await ctx.close();
      }
    });

    await check("page/interop-go-mux", page, async () => {
      const wsURL = base.replace(/^http/, "ws") + "/test/mux";
      return page.evaluate(async (url: string) => {
        const lib = (globalThis as unknown as UI).wsmuxUI.lib;
        const s = await lib.connect(url, { initialStreamWindow: 1 << 20, initialSessionWindow: 16 << 20 });
        const n = 16, size = 1 << 20;
        const hex = (b: ArrayBuffer) => [...new Uint8Array(b)].map((x) => x.toString(16).padStart(2, "0")).join("");
        const t0 = performance.now();
        const res = await Promise.all(
          Array.from({ length: n }, async (_, k) => {
            const st = await s.open({ "x-test": "echo" });
            const data = new Uint8Array(size);
            for (let i = 0; i < size; i++) data[i] = (i % 251 + 7 * k) & 0xff;
            const w = st.writable.getWriter();
            const sending = (async () => {
              for (let off = 0; off < size; off += 65536) await w.write(data.subarray(off, off + 65536));
              await w.close();
            })();
            const got = new Uint8Array(size);
            let off = 0;
            const rd = st.readable.getReader();
            for (;;) {
              const { value, done } = await rd.read();
              if (done) break;
              if (off + value.length > size) throw new Error(`stream ${k}: more bytes than sent`);
              got.set(value, off);
              off += value.length;
            }
            await sending;
            const [a, b] = await Promise.all([crypto.subtle.digest("SHA-256", data), crypto.subtle.digest("SHA-256", got)]);
            if (off !== size || hex(a) !== hex(b)) throw new Error(`stream ${k}: ${off} bytes, sha256 ${hex(b)} want ${hex(a)}`);
          }),
        );
        const secs = (performance.now() - t0) / 1000;
        // A reset the Go side reports with its code: once its application has
        // taken the stream, which it says with a byte (a stream reset before
        // that is dropped, spec 7.3).
        const r = await s.open({ "x-test": "reset" });
        await r.writable.getWriter().write(new TextEncoder().encode("x"));
        await r.readable.getReader().read();
        r.reset(0x1234, "page reset");
        const rtts: number[] = [];
        for (let i = 0; i < 20; i++) rtts.push(await s.ping());
        rtts.sort((x, y) => x - y);
        await s.close();
        return `${res.length} streams x ${size} bytes echoed, sha256 checked, ${((2 * n * size) / 1048576 / secs).toFixed(1)} MiB/s both ways, PING RTT median ${rtts[10].toFixed(2)} ms`;
      }, wsURL);
    });

    if (consoleErrors.length) report("page/no-uncaught-errors", false, "", consoleErrors.join("\n"));
    else report("page/no-uncaught-errors", true);
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  report("browser/launch", false, "", String(e?.stack ?? e));
  process.exit(1);
});
