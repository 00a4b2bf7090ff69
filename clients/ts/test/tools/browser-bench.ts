// Browser throughput and echo latency of an exec of `cat` through wsmux
// gateway, over WSMUX/1 (the TS client) and over v5.channel.k8s.io (what a
// browser terminal speaks today), measured inside headless chromium.
// Driven by BenchmarkBrowserExec (gateway/webui):
//   node dist/test/tools/browser-bench.js BASE_URL TOKEN wsmux|v5 throughput|rtt COUNT
// throughput: COUNT MiB written to cat's stdin while its stdout is read;
// rtt: COUNT round trips of one byte. Prints {"ns": elapsed ns in the page,
// "bytes": echoed bytes, "medianRttNs": ...}.
import puppeteer from "puppeteer-core";

const [base, token, proto, mode, countStr] = process.argv.slice(2);
const count = Number(countStr);

async function main() {
  const browser = await puppeteer.launch({
    executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"],
  });
  try {
    const page = await browser.newPage();
    await page.goto(base + "/ui/", { waitUntil: "load" });
    if (process.env.CHUNK_KIB) await page.evaluate((k: number) => Object.assign(globalThis, { CHUNK_KIB: k }), Number(process.env.CHUNK_KIB));
    const res = await page.evaluate(
      async (token: string, proto: string, mode: string, count: number) => {
        type Lib = typeof import("../../src/index.js");
        const lib = (globalThis as unknown as { wsmuxUI: { lib: Lib } }).wsmuxUI.lib;
        const target = { namespace: "default", pod: "shell", command: ["cat"], stdin: true, tty: false };
        const url = `${location.protocol === "https:" ? "wss:" : "ws:"}//${location.host}${lib.execPath(target)}`;
        const chunk = new Uint8Array((Number((globalThis as unknown as { CHUNK_KIB?: number }).CHUNK_KIB) || 16) << 10).fill(0x61);
        let send: (b: Uint8Array) => Promise<void>;
        let recv: () => Promise<number>; // bytes of the next stdout chunk
        let finish: () => Promise<void>;
        if (proto === "wsmux") {
          const s = await lib.connect(url, { token, protocols: lib.streamProtocolOffer(), initialStreamWindow: 1 << 20, initialSessionWindow: 8 << 20 });
          const ex = await lib.startExec(s, target);
          const w = ex.stdin!.getWriter();
          const rd = ex.stdout.getReader();
          send = (b) => w.write(b);
          recv = async () => {
            const { value, done } = await rd.read();
            if (done) throw new Error("stdout ended");
            return value.length;
          };
          finish = async () => {
            await w.close();
            await ex.status;
            await s.close();
          };
        } else {
          const ws = new WebSocket(url, ["v5.channel.k8s.io", lib.bearerProtocol(token)]);
          ws.binaryType = "arraybuffer";
          const queue: number[] = [];
          let wake: (() => void) | null = null;
          let closed: Error | null = null;
          ws.onmessage = (ev) => {
            const b = new Uint8Array(ev.data as ArrayBuffer);
            if (b[0] === 1 && b.length > 1) {
              queue.push(b.length - 1);
              wake?.();
            }
          };
          ws.onclose = (ev) => {
            closed = new Error(`closed ${ev.code}`);
            wake?.();
          };
          await new Promise<void>((res, rej) => {
            ws.onopen = () => res();
            ws.onerror = () => rej(new Error("v5 WebSocket failed"));
          });
          // No flow control: the page holds back on its own send buffer.
          send = async (b) => {
            while (ws.bufferedAmount > 1 << 20) await new Promise((r) => setTimeout(r, 1));
            const m = new Uint8Array(b.length + 1);
            m[0] = 0;
            m.set(b, 1);
            ws.send(m);
          };
          recv = async () => {
            for (;;) {
              const n = queue.shift();
              if (n !== undefined) return n;
              if (closed) throw closed;
              await new Promise<void>((r) => (wake = r));
            }
          };
          finish = async () => {
            ws.send(new Uint8Array([255, 0]));
            ws.close(1000);
          };
        }
        if (mode === "throughput") {
          const total = count << 20;
          const t0 = performance.now();
          const writing = (async () => {
            for (let off = 0; off < total; off += chunk.length) await send(chunk);
          })();
          let got = 0;
          while (got < total) got += await recv();
          await writing;
          const ns = (performance.now() - t0) * 1e6;
          await finish();
          return { ns, bytes: got, medianRttNs: 0 };
        }
        const one = new Uint8Array([0x62]);
        const rtts: number[] = [];
        const t0 = performance.now();
        for (let i = 0; i < count; i++) {
          const t = performance.now();
          await send(one);
          let n = 0;
          while (n < 1) n += await recv();
          rtts.push((performance.now() - t) * 1e6);
        }
        const ns = (performance.now() - t0) * 1e6;
        await finish();
        rtts.sort((a, b) => a - b);
        return { ns, bytes: count, medianRttNs: rtts[Math.floor(rtts.length / 2)] };
      },
      token,
      proto,
      mode,
      count,
    );
    console.log(JSON.stringify(res));
  } finally {
    await browser.close();
  }
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
