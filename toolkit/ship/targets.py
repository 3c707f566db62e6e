"""The ship targets: where a bundled file runs (android, ios, web, server), the formats each may
take (by file kind, from toolkit.formats FORMATS), the bench runtimes whose batch-1 latency ranks
them (the first that has rows, or the fastest of all), what stands in where none has, and the
embed snippet per file kind or per web library. Light: `toolkit --help` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import PurePath
from string import Template

from toolkit.formats import FORMATS


@dataclass(frozen=True)
class Snippet:
    """How an app loads one kind of file: a code block in `language` (a Markdown fence name),
    with $file, $stem, $ext, $input, $output, $height, $width and $providers filled in."""

    language: str
    template: str

    def render(self, **fields: object) -> str:
        """The snippet with the fields filled in (a missing one is a KeyError: a bug here)."""
        return Template(self.template).substitute({k: str(v) for k, v in fields.items()})


@dataclass(frozen=True)
class Target:
    """One place a bundle's file runs: the formats it may take and how they are ranked."""

    name: str
    description: str
    formats: tuple[str, ...]  # FORMATS keys, in FORMATS order
    # bench runtimes in order of preference; how they rank a file is `ranking`'s (picks.py
    # RANKINGS): "first": the first that opens it and has an ok batch-1 row in bench.json for
    # some file of this target; "fastest": every one that opens it, each (file, runtime) pair
    # a candidate, its fastest ok row (over thread counts) its figure
    runtimes: tuple[str, ...]
    # how an app loads a file: by file suffix (".tflite"), or by the web library `apps` names
    snippets: dict[str, Snippet]
    ranking: str = "first"
    # runtimes whose rows stand in where none of `runtimes` has an ok row for a file of this
    # target (ranked "first"; the pick says its figures are not the target's own)
    fallback: tuple[str, ...] = ()
    # ranking runtime -> the web library (toolkit.runtimes.web LIBRARIES key) the app runs the
    # picked file with; empty for a target without a web app
    apps: dict[str, str] = field(default_factory=dict)
    backend: str | None = None  # the bench rows' `backend` the app runs on (None: any)

    def snippet_for(self, file: str, runtime: str | None = None) -> Snippet:
        """The embed snippet of a file this target takes, ranked on `runtime` (the library
        the app runs it with, for a target with `apps`)."""
        if self.apps:
            return self.snippets[self.apps[runtime or self.runtimes[0]]]
        return self.snippets[PurePath(file).suffix]


def formats_with_suffix(*suffixes: str) -> tuple[str, ...]:
    """The FORMATS keys whose file ends in one of `suffixes`, in FORMATS order."""
    return tuple(name for name, f in FORMATS.items() if PurePath(f.filename).suffix in suffixes)


MEDIAPIPE_ANDROID = Snippet(
    "kotlin",
    """\
// build.gradle.kts: implementation("com.google.mediapipe:tasks-vision:latest.release")
// $file in app/src/main/assets; the class names come from the file's metadata
import com.google.mediapipe.framework.image.BitmapImageBuilder
import com.google.mediapipe.tasks.core.BaseOptions
import com.google.mediapipe.tasks.vision.imageclassifier.ImageClassifier

val options = ImageClassifier.ImageClassifierOptions.builder()
    .setBaseOptions(BaseOptions.builder().setModelAssetPath("$file").build())
    .setMaxResults(3)
    .build()
val classifier = ImageClassifier.createFromOptions(context, options)
val result = classifier.classify(BitmapImageBuilder(bitmap).build())
val best = result.classificationResult().classifications()[0].categories()[0]
// best.categoryName(), best.score(): a probability 0-1
""",
)

ORT_ANDROID = Snippet(
    "kotlin",
    """\
// build.gradle.kts: implementation("com.microsoft.onnxruntime:onnxruntime-android:latest.release")
import ai.onnxruntime.OnnxTensor
import ai.onnxruntime.OrtEnvironment
import ai.onnxruntime.OrtSession
import java.nio.FloatBuffer

val env = OrtEnvironment.getEnvironment()
val session = env.createSession(
    context.assets.open("$file").readBytes(),
    OrtSession.SessionOptions().apply { addNnapi() },
)
// pixels: FloatArray of $height x $width x 3 RGB values 0-255 (not 0-1), row by row
val shape = longArrayOf(1, $height, $width, 3)
val input = OnnxTensor.createTensor(env, FloatBuffer.wrap(pixels), shape)
session.run(mapOf("$input" to input)).use { out ->
    val logits = (out[0].value as Array<FloatArray>)[0]  // $output: softmax them for probabilities
}
""",
)

MEDIAPIPE_IOS = Snippet(
    "swift",
    """\
// Podfile: pod 'MediaPipeTasksVision'; $file added to the app target
import MediaPipeTasksVision

let options = ImageClassifierOptions()
options.baseOptions.modelAssetPath = Bundle.main.path(forResource: "$stem", ofType: "$ext")!
options.maxResults = 3
let classifier = try ImageClassifier(options: options)
let result = try classifier.classify(image: try MPImage(uiImage: image))
let best = result.classificationResult.classifications[0].categories[0]
// best.categoryName, best.score: a probability 0-1
""",
)

ORT_IOS = Snippet(
    "swift",
    """\
// Podfile: pod 'onnxruntime-objc'; $file added to the app target
import onnxruntime_objc

let env = try ORTEnv(loggingLevel: .warning)
let options = try ORTSessionOptions()
try options.appendCoreMLExecutionProvider(with: ORTCoreMLExecutionProviderOptions())
let path = Bundle.main.path(forResource: "$stem", ofType: "$ext")!
let session = try ORTSession(env: env, modelPath: path, sessionOptions: options)
// pixels: [Float] of $height x $width x 3 RGB values 0-255 (not 0-1), row by row
let data = NSMutableData(bytes: pixels, length: pixels.count * MemoryLayout<Float>.size)
let input = try ORTValue(tensorData: data, elementType: .float, shape: [1, $height, $width, 3])
let outputs = try session.run(
    withInputs: ["$input": input], outputNames: ["$output"], runOptions: nil)
let logits = try outputs["$output"]!.tensorData()  // float32 logits: softmax them for probabilities
""",
)

MEDIAPIPE_WEB = Snippet(
    "js",
    """\
// npm install @mediapipe/tasks-vision; serve its wasm/ folder with the page (as the bundle's web/)
import { FilesetResolver, ImageClassifier } from "@mediapipe/tasks-vision";

const vision = await FilesetResolver.forVisionTasks("./wasm");
const classifier = await ImageClassifier.createFromOptions(vision, {
  baseOptions: { modelAssetPath: "./$file" },
  maxResults: 3,
});
const result = classifier.classify(document.querySelector("img"));
const best = result.classifications[0].categories[0];
// best.categoryName, best.score: a probability 0-1
""",
)

LITERT_WEB = Snippet(
    "js",
    """\
// npm install @litertjs/core; serve its wasm/ folder with the page (as the bundle's web/lib/)
import { loadAndCompile, loadLiteRt, Tensor } from "@litertjs/core";

await loadLiteRt("./wasm/", { threads: crossOriginIsolated });  // threads: COOP/COEP headers
const model = await loadAndCompile("./$file", { accelerator: "wasm" });
// pixels: $height x $width x 3 RGB values 0-255 (not 0-1), row by row, in the input's dtype
const input = new Tensor(pixels, [1, $height, $width, 3]);
const [output] = await model.run([input]);
const probabilities = output.toTypedArray();  // $output; class i: line i of labels.txt
input.delete();
output.delete();
""",
)

ORT_WEB = Snippet(
    "js",
    """\
// npm install onnxruntime-web; serve its dist/ort-wasm-* files with the page
import * as ort from "onnxruntime-web/wasm";

ort.env.wasm.wasmPaths = "./";  // never a CDN
ort.env.wasm.numThreads = crossOriginIsolated ? navigator.hardwareConcurrency : 1;
const session = await ort.InferenceSession.create("./$file", { executionProviders: ["wasm"] });
// pixels: Float32Array of $height x $width x 3 RGB values 0-255 (not 0-1), row by row
const input = new ort.Tensor("float32", pixels, [1, $height, $width, 3]);
const outputs = await session.run({ "$input": input });
const logits = outputs["$output"].data;  // softmax them for probabilities; labels.txt: names
""",
)

ORT_SERVER = Snippet(
    "python",
    """\
import numpy as np
import onnxruntime as ort
from PIL import Image

session = ort.InferenceSession("$file", providers=[$providers])
labels = open("labels.txt").read().splitlines()
image = Image.open("photo.jpg").convert("RGB").resize(($width, $height))
pixels = np.asarray(image, dtype=np.float32)[None]  # NHWC, RGB 0-255 (not 0-1)
logits = session.run(["$output"], {"$input": pixels})[0]  # logits: softmax for probabilities
print(labels[int(logits[0].argmax())])
""",
)

TFLITE = formats_with_suffix(".tflite")
WEB_FILES = formats_with_suffix(".tflite", ".onnx", ".ort")
ORT_MOBILE = formats_with_suffix(".ort")
ONNX = formats_with_suffix(".onnx")

TARGETS: dict[str, Target] = {
    t.name: t
    for t in (
        Target(
            name="android",
            description="Android app: MediaPipe Tasks (LiteRT) runs a .tflite, ONNX Runtime "
            "Mobile (NNAPI) a .ort",
            formats=TFLITE + ORT_MOBILE,
            runtimes=("litert", "ort-cpu"),
            snippets={".tflite": MEDIAPIPE_ANDROID, ".ort": ORT_ANDROID},
        ),
        Target(
            name="ios",
            description="iOS app: MediaPipe Tasks (LiteRT) runs a .tflite, ONNX Runtime Mobile "
            "(CoreML) a .ort",
            formats=TFLITE + ORT_MOBILE,
            runtimes=("litert", "ort-cpu"),
            snippets={".tflite": MEDIAPIPE_IOS, ".ort": ORT_IOS},
        ),
        Target(
            name="web",
            description="web page: MediaPipe Tasks or LiteRT.js runs a .tflite, onnxruntime-web "
            "a .onnx or .ort, in the browser (WebAssembly): the fastest there",
            formats=WEB_FILES,
            runtimes=("web-mediapipe", "web-litert", "web-ort"),
            snippets={"web-mediapipe": MEDIAPIPE_WEB, "web-litert": LITERT_WEB, "web-ort": ORT_WEB},
            ranking="fastest",
            fallback=("mediapipe",),  # no browser here: MediaPipe Tasks in Python, labelled so
            apps={
                "web-mediapipe": "web-mediapipe",
                "web-litert": "web-litert",
                "web-ort": "web-ort",
                "mediapipe": "web-mediapipe",
            },
            backend="wasm",
        ),
        Target(
            name="server",
            description="server: ONNX Runtime runs a .onnx (on CUDA where bench.json has CUDA "
            "rows, else on the CPU)",
            formats=ONNX,
            runtimes=("ort-cuda", "ort-cpu"),
            snippets={".onnx": ORT_SERVER},
        ),
    )
}

# FORMATS rows deliberately in no target, and why (tests/test_ship.py: every other row is in one)
EXCLUDED: dict[str, str] = {}

# what an ONNX Runtime session is given per ranking runtime ($providers of the server snippet)
PROVIDERS = {
    "ort-cpu": '"CPUExecutionProvider"',
    "ort-cuda": '"CUDAExecutionProvider", "CPUExecutionProvider"',
}
