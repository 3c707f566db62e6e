// The test and bench page's glue: Python (toolkit/runtimes/web/session.py) drives one model per
// page through `window.toolkit`; images come as base64 of their raw bytes in the input's dtype,
// scores go back the same way as float32.
import { defaultThreads, timeCalls, webgpuUnavailable } from "./timing.js";

const TYPED = { float32: Float32Array, int8: Int8Array, uint8: Uint8Array, int32: Int32Array };
let model = null;
let bound = null; // {inputs, shape}: the batch made ready once
let last = [];

async function decode(b64) {
  const response = await fetch(`data:application/octet-stream;base64,${b64}`);
  return new Uint8Array(await response.arrayBuffer());
}

function encode(arrays) {
  const total = arrays.reduce((n, a) => n + a.length, 0);
  const all = new Float32Array(total);
  let at = 0;
  for (const a of arrays) {
    all.set(a, at);
    at += a.length;
  }
  const bytes = new Uint8Array(all.buffer);
  let text = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    text += String.fromCharCode.apply(null, bytes.subarray(i, i + 0x8000));
  }
  return btoa(text);
}

/** `calls` inputs of `shape` in `dtype`, cut from the decoded bytes. */
async function split(b64, dtype, shape, calls) {
  const bytes = await decode(b64);
  const Typed = TYPED[dtype];
  if (!Typed) throw new Error(`input dtype ${dtype} is not one the page can send`);
  const values = new Typed(bytes.buffer);
  const size = values.length / calls;
  return Array.from({ length: calls }, (_, i) => values.slice(i * size, (i + 1) * size));
}

async function runAll(inputs, shape) {
  const outputs = [];
  for (const x of inputs) outputs.push(await model.classify(x, shape));
  return outputs;
}

window.toolkit = {
  async open(moduleUrl, modelUrl, { base, threads }) {
    const library = await import(moduleUrl);
    const chosen = threads ?? defaultThreads();
    model = await library.load(modelUrl, { base, threads: chosen });
    return {
      inputShape: model.inputShape,
      inputType: model.inputType,
      outputShape: model.outputShape,
      inputName: model.inputName ?? null,
      outputName: model.outputName ?? null,
      threads: model.threads,
      version: model.version ?? null,
      isolated: globalThis.crossOriginIsolated,
    };
  },
  async classify(b64, dtype, shape, calls) {
    return encode(await runAll(await split(b64, dtype, shape, calls), shape));
  },
  async bind(b64, dtype, shape, calls) {
    bound = { inputs: await split(b64, dtype, shape, calls), shape };
    return bound.inputs.length;
  },
  async runBound() {
    last = await runAll(bound.inputs, bound.shape);
  },
  lastOutputs() {
    return encode(last);
  },
  async time(protocol) {
    return timeCalls(() => runAll(bound.inputs, bound.shape), protocol);
  },
  webgpuUnavailable,
  async close() {
    await model?.close();
    model = null;
  },
};
