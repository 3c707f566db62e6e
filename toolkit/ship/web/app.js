// Classifies the images a user picks or drops with the library the bundle was shipped for
// (MediaPipe Tasks, LiteRT.js or onnxruntime-web), through its module's one interface:
// load(modelUrl, {base, threads}) -> {inputType, labels?, classify(pixels, shape), close()}.
// Each image is drawn at the model's input size and read back as RGB pixels 0-255.

const main = document.querySelector("main");
const status = document.getElementById("status");
const input = document.getElementById("files");
const drop = document.getElementById("drop");
const results = document.getElementById("results");
const TYPED = { float32: Float32Array, uint8: Uint8Array };

function setStatus(state, text) {
  status.dataset.state = state;
  status.textContent = text;
}

function here(path) {
  return new URL(path, document.baseURI).href;
}

/** The class names: labels.txt where the bundle wrote one, else the file's own (MediaPipe). */
async function readLabels() {
  if (!main.dataset.labels) return [];
  const response = await fetch(here(main.dataset.labels));
  if (!response.ok) throw new Error(`${main.dataset.labels}: HTTP ${response.status}`);
  return (await response.text()).split("\n").filter((line) => line.length > 0);
}

async function loadModel() {
  const library = await import(here(main.dataset.module));
  // threaded WebAssembly only where the page is cross-origin isolated (COOP/COEP headers)
  const threads = globalThis.crossOriginIsolated ? navigator.hardwareConcurrency || 1 : 1;
  const model = await library.load(here(main.dataset.model), {
    base: here(main.dataset.base),
    threads,
  });
  if (!TYPED[model.inputType]) {
    throw new Error(`the model takes ${model.inputType} input; this page sends float32 or uint8`);
  }
  return { model, labels: await readLabels() };
}

/** The image drawn at the model's input size: (1, H, W, 3) RGB 0-255 in the input's dtype. */
async function pixelsOf(file, dtype) {
  const height = Number(main.dataset.height);
  const width = Number(main.dataset.width);
  const bitmap = await createImageBitmap(file, {
    colorSpaceConversion: "none",
    premultiplyAlpha: "none",
  });
  const context = new OffscreenCanvas(width, height).getContext("2d");
  context.imageSmoothingQuality = "high";
  context.drawImage(bitmap, 0, 0, width, height);
  bitmap.close();
  const rgba = context.getImageData(0, 0, width, height).data;
  const pixels = new TYPED[dtype](height * width * 3);
  for (let i = 0, j = 0; j < rgba.length; i += 3, j += 4) {
    pixels[i] = rgba[j];
    pixels[i + 1] = rgba[j + 1];
    pixels[i + 2] = rgba[j + 2];
  }
  return { pixels, shape: [1, height, width, 3] };
}

function softmax(logits) {
  const top = Math.max(...logits);
  const exp = Array.from(logits, (x) => Math.exp(x - top));
  const sum = exp.reduce((a, b) => a + b, 0);
  return exp.map((x) => x / sum);
}

/** The best classes: [{index, name, score}], highest score first. */
function ranked({ model, labels }, output) {
  const scores = main.dataset.scores === "logits" ? softmax(output) : Array.from(output);
  const names = model.labels ?? labels;
  return scores
    .map((score, index) => ({ index, score, name: names[index] ?? String(index) }))
    .sort((a, b) => b.score - a.score)
    .slice(0, Number(main.dataset.maxResults));
}

function percent(score) {
  return `${(100 * score).toFixed(1)}%`;
}

function showResult(file, url, categories) {
  const item = document.createElement("li");
  item.className = "result";
  item.dataset.file = file.name;
  const image = document.createElement("img");
  image.src = url;
  image.alt = file.name;
  const text = document.createElement("div");
  const name = document.createElement("div");
  name.className = "file";
  name.textContent = file.name;
  const list = document.createElement("ol");
  for (const category of categories) {
    const line = document.createElement("li");
    line.dataset.index = String(category.index);
    line.dataset.name = category.name;
    line.dataset.score = String(category.score);
    line.textContent = `${category.name} ${percent(category.score)}`;
    list.append(line);
  }
  text.append(name, list);
  item.append(image, text);
  results.append(item);
}

function showFailure(file, message) {
  const item = document.createElement("li");
  item.className = "result failed";
  item.dataset.file = file.name;
  item.dataset.error = message;
  item.textContent = `${file.name}: ${message}`;
  results.append(item);
}

async function classifyFiles(loaded, files) {
  const images = [...files];
  setStatus("busy", `Classifying ${images.length} image(s)…`);
  for (const file of images) {
    let input;
    try {
      input = await pixelsOf(file, loaded.model.inputType);
    } catch {
      showFailure(file, "not an image this browser can decode");
      continue;
    }
    try {
      const output = await loaded.model.classify(input.pixels, input.shape);
      showResult(file, URL.createObjectURL(file), ranked(loaded, output));
    } catch (error) {
      showFailure(file, `the model failed: ${error.message ?? error}`);
    }
  }
  const done = results.querySelectorAll(".result:not(.failed)").length;
  setStatus("ready", `Classified ${done} image(s).`);
}

async function start() {
  let loaded;
  try {
    loaded = await loadModel();
  } catch (error) {
    setStatus("error", `Could not load ${main.dataset.model}: ${error.message ?? error}`);
    return;
  }
  let queue = Promise.resolve();
  const classify = (files) => {
    queue = queue.then(() => classifyFiles(loaded, files));
  };
  input.disabled = false;
  input.addEventListener("change", () => classify(input.files));
  drop.addEventListener("dragover", (event) => {
    event.preventDefault();
    drop.classList.add("over");
  });
  drop.addEventListener("dragleave", () => drop.classList.remove("over"));
  drop.addEventListener("drop", (event) => {
    event.preventDefault();
    drop.classList.remove("over");
    classify(event.dataTransfer.files);
  });
  const threads = loaded.model.threads === 1 ? "1 thread" : `${loaded.model.threads} threads`;
  main.dataset.threads = String(loaded.model.threads);
  setStatus("ready", `Ready (${main.dataset.library}, ${threads}): pick or drop images.`);
}

start();
