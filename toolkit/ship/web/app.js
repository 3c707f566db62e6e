// Classifies the images a user picks or drops with MediaPipe Tasks' ImageClassifier, the
// client Android, iOS and the web share: it reads the class names and the input's
// normalization from the .tflite file's metadata, so this page holds no model facts.
import { FilesetResolver, ImageClassifier } from "./mediapipe/vision_bundle.mjs";

const main = document.querySelector("main");
const status = document.getElementById("status");
const input = document.getElementById("files");
const drop = document.getElementById("drop");
const results = document.getElementById("results");

function setStatus(state, text) {
  status.dataset.state = state;
  status.textContent = text;
}

async function createClassifier() {
  const wasm = new URL("./mediapipe/wasm", import.meta.url).href;
  const fileset = await FilesetResolver.forVisionTasks(wasm);
  return ImageClassifier.createFromOptions(fileset, {
    baseOptions: {
      modelAssetPath: new URL(main.dataset.model, document.baseURI).href,
      delegate: "CPU",
    },
    runningMode: "IMAGE",
    maxResults: Number(main.dataset.maxResults),
  });
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
  const ranked = document.createElement("ol");
  for (const category of categories) {
    const line = document.createElement("li");
    line.dataset.index = String(category.index);
    line.dataset.name = category.displayName || category.categoryName;
    line.dataset.score = String(category.score);
    line.textContent = `${line.dataset.name} ${percent(category.score)}`;
    ranked.append(line);
  }
  text.append(name, ranked);
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

async function classifyFiles(classifier, files) {
  const images = [...files];
  setStatus("busy", `Classifying ${images.length} image(s)…`);
  for (const file of images) {
    const url = URL.createObjectURL(file);
    const image = new Image();
    image.src = url;
    try {
      await image.decode();
    } catch {
      URL.revokeObjectURL(url);
      showFailure(file, "not an image this browser can decode");
      continue;
    }
    const result = classifier.classify(image);
    showResult(file, url, result.classifications[0].categories);
  }
  setStatus("ready", `Classified ${results.querySelectorAll(".result:not(.failed)").length} image(s).`);
}

async function start() {
  let classifier;
  try {
    classifier = await createClassifier();
  } catch (error) {
    setStatus("error", `Could not load ${main.dataset.model}: ${error.message ?? error}`);
    return;
  }
  let queue = Promise.resolve();
  const classify = (files) => {
    queue = queue.then(() => classifyFiles(classifier, files));
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
  setStatus("ready", "Ready: pick or drop images.");
}

start();
