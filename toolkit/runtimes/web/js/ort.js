// onnxruntime-web: an .onnx or .ort file on the wasm execution provider.

/**
 * Load `modelUrl`; `base` is the URL of the onnxruntime-web package folder.
 * @param {string} modelUrl
 * @param {{base: string, threads: number}} options
 */
export async function load(modelUrl, { base, threads }) {
  const ort = await import(new URL("dist/ort.wasm.min.mjs", base).href);
  ort.env.wasm.wasmPaths = new URL("dist/", base).href; // served beside it, never a CDN
  ort.env.wasm.numThreads = threads;
  const session = await ort.InferenceSession.create(modelUrl, { executionProviders: ["wasm"] });
  const [inputName] = session.inputNames;
  const [outputName] = session.outputNames;
  const meta = session.inputMetadata?.[0] ?? {};
  const outMeta = session.outputMetadata?.[0] ?? {};
  const dims = (shape) => (shape ?? []).map((d) => (typeof d === "number" && d >= 0 ? d : null));
  const inputShape = dims(meta.shape);
  return {
    inputShape,
    inputType: meta.type ?? "float32",
    outputShape: dims(outMeta.shape),
    inputName,
    outputName,
    threads,
    version: ort.env.versions?.web,
    /** Images of `shape` (N, H, W, 3) in the input's dtype -> the output's values. */
    async classify(pixels, shape) {
      const tensor = new ort.Tensor(meta.type ?? "float32", pixels, shape);
      const outputs = await session.run({ [inputName]: tensor });
      const scores = Float32Array.from(outputs[outputName].data);
      outputs[outputName].dispose?.();
      return scores;
    },
    close() {
      return session.release();
    },
  };
}
