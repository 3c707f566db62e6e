// LiteRT.js (@litertjs/core): a .tflite file compiled for the wasm accelerator (XNNPACK).
// The page's import map must resolve "@litertjs/wasm-utils" (the package's one dependency).

/**
 * Load `modelUrl`; `base` is the URL of the @litertjs/core package folder.
 * @param {string} modelUrl
 * @param {{base: string, threads: number}} options
 */
export async function load(modelUrl, { base, threads }) {
  const core = await import(new URL("dist/index.js", base).href);
  // the threaded build only when more than one thread is asked (it needs cross-origin isolation)
  await (core.getGlobalLiteRtPromise() ??
    core.loadLiteRt(new URL("wasm/", base).href, { threads: threads > 1 }));
  const model = await core.loadAndCompile(modelUrl, {
    accelerator: "wasm",
    cpuOptions: { numThreads: threads },
  });
  const input = model.getInputDetails()[0];
  const output = model.getOutputDetails()[0];
  return {
    inputShape: Array.from(input.shape),
    inputType: input.dtype,
    outputShape: Array.from(output.shape),
    threads,
    /** Images of `shape` (N, H, W, 3) in the input's dtype -> the output's values. */
    async classify(pixels, shape) {
      const tensor = new core.Tensor(pixels, shape);
      try {
        const [result] = await model.run([tensor]);
        const scores = Float32Array.from(result.toTypedArray());
        result.delete();
        return scores;
      } finally {
        tensor.delete();
      }
    },
    close() {
      model.delete();
    },
  };
}
