// The page-side timing loop every web runtime shares: `warmup` untimed calls, then calls timed
// with performance.now() until `runs` calls or `seconds` have passed (the protocol of
// toolkit/runtimes/timing.py, run where the library runs: a round trip from Python per call
// would time the browser's automation, not the library).

/**
 * Per-call times in milliseconds of `call` (sync or async).
 * @param {() => unknown} call
 * @param {{warmup: number, runs: number|null, seconds: number|null}} protocol
 * @returns {Promise<number[]>}
 */
export async function timeCalls(call, { warmup, runs = null, seconds = null }) {
  for (let i = 0; i < warmup; i++) await call();
  const times = [];
  let elapsed = 0;
  const done = () =>
    (runs !== null && times.length >= runs) ||
    (seconds !== null && times.length >= 1 && elapsed >= seconds * 1e3);
  while (!done()) {
    const start = performance.now();
    await call();
    times.push(performance.now() - start);
    elapsed += times[times.length - 1];
  }
  return times;
}

/** The thread count a library gets when none is asked: every core where the page is
 * cross-origin isolated (WebAssembly threads allowed), else 1. */
export function defaultThreads() {
  return globalThis.crossOriginIsolated ? navigator.hardwareConcurrency || 1 : 1;
}

/** null when the browser has a WebGPU adapter, else why not (one line). */
export async function webgpuUnavailable() {
  if (!navigator.gpu) return "the browser has no WebGPU (navigator.gpu is undefined)";
  try {
    const adapter = await navigator.gpu.requestAdapter();
    return adapter ? null : "the browser found no WebGPU adapter (no GPU, or GPU blocked)";
  } catch (error) {
    return `WebGPU adapter request failed (${String(error).split("\n")[0]})`;
  }
}
