"""The ship targets: where a bundled file runs (android, ios, web, server), the formats each may
take (by file kind, from toolkit.formats FORMATS), the bench runtimes whose batch-1 latency ranks
them, and the embed snippet per file kind. Light: `toolkit --help` reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
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
    # bench runtimes in order of preference: a file is ranked by the first that opens it and
    # has an ok batch-1 row in bench.json for some file of this target
    runtimes: tuple[str, ...]
    snippets: dict[str, Snippet]  # file suffix (".tflite") -> how an app loads such a file

    def snippet_for(self, file: str) -> Snippet:
        """The embed snippet of a file this target takes."""
        return self.snippets[PurePath(file).suffix]


def formats_with_suffix(suffix: str) -> tuple[str, ...]:
    """The FORMATS keys whose file ends in `suffix`, in FORMATS order."""
    return tuple(name for name, f in FORMATS.items() if PurePath(f.filename).suffix == suffix)


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
            description="web page: @mediapipe/tasks-vision runs a .tflite in the browser "
            "(WebAssembly)",
            formats=TFLITE,
            runtimes=("mediapipe",),
            snippets={".tflite": MEDIAPIPE_WEB},
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
