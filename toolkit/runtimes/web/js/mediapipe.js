// MediaPipe Tasks (@mediapipe/tasks-vision): a .tflite file with TFLite Model Metadata in an
// ImageClassifier, fed uint8 RGB frames as a camera gives them; every class's score out.
// MediaPipe takes no thread count: its WebAssembly runs the model on one thread.

/**
 * Load `modelUrl`; `base` is the URL of the @mediapipe/tasks-vision package folder.
 * @param {string} modelUrl
 * @param {{base: string}} options
 */
export async function load(modelUrl, { base }) {
  const { FilesetResolver, ImageClassifier } = await import(
    new URL("vision_bundle.mjs", base).href
  );
  const fileset = await FilesetResolver.forVisionTasks(new URL("wasm", base).href);
  const classifier = await ImageClassifier.createFromOptions(fileset, {
    baseOptions: { modelAssetPath: modelUrl, delegate: "CPU" },
    runningMode: "IMAGE",
    maxResults: -1,
  });
  const labels = []; // class names from the file's metadata, by index, as classify meets them
  return {
    inputShape: null, // the task resizes any frame to the model's input
    inputType: "uint8",
    outputShape: null,
    threads: 1,
    labels,
    /** One (1, H, W, 3) uint8 RGB frame -> every class's score, by class index. */
    classify(pixels, [count, height, width]) {
      if (count !== 1) throw new Error("MediaPipe classifies one frame per call");
      const rgba = new Uint8ClampedArray(height * width * 4);
      for (let i = 0, j = 0; i < pixels.length; i += 3, j += 4) {
        rgba[j] = pixels[i];
        rgba[j + 1] = pixels[i + 1];
        rgba[j + 2] = pixels[i + 2];
        rgba[j + 3] = 255;
      }
      const result = classifier.classify(new ImageData(rgba, width, height));
      const categories = result.classifications[0].categories;
      const scores = new Float32Array(categories.length);
      for (const c of categories) {
        scores[c.index] = c.score;
        labels[c.index] = c.displayName || c.categoryName;
      }
      return scores;
    },
    close() {
      classifier.close();
    },
  };
}
