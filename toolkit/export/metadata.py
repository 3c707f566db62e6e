"""TFLite Model Metadata in every .tflite: what MediaPipe Tasks (and the other metadata readers
on Android, iOS and the web) need to run the file as an image classifier.

The standard schema (tensorflow/tflite-support `metadata_schema.fbs`, the same in
`mediapipe/tasks/metadata`): a `ModelMetadata` flatbuffer with file identifier `M001`, stored
in a buffer of the model that the model's `metadata` list names `TFLITE_METADATA`, and the
associated files (here `labels.txt`, TENSOR_AXIS_LABELS) packed as a zip appended to the
flatbuffer, as the metadata writers pack them. The model's tensors, ops and weights are kept
as they are: the file computes what it computed without metadata.

Written with `flatbuffers.Builder` from the schema's field slots, so export needs no writer
package (tflite-support needs protobuf < 4; MediaPipe's writers need a native module).
"""

from __future__ import annotations

import io
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from toolkit.export.tflite import packed_model
from toolkit.runfiles.classnames import packed_files  # noqa: F401  (their reader, re-exported)
from toolkit.runfiles.folder import (  # the packed labels file has the run's name
    LABELS_FILE,
    labels_text,
)

METADATA_NAME = "TFLITE_METADATA"  # the model metadata entry the readers look for
FILE_IDENTIFIER = b"M001"
# the oldest metadata parser that reads every field written here (all of schema 1.0.0)
MIN_PARSER_VERSION = "1.0.0"

# enum values of metadata_schema.fbs
_TENSOR_AXIS_LABELS = 2  # AssociatedFileType
_RGB = 1  # ColorSpaceType
_FEATURE_PROPERTIES, _IMAGE_PROPERTIES = 1, 2  # ContentProperties
_NORMALIZATION_OPTIONS = 1  # ProcessUnitOptions


@dataclass(frozen=True)
class ModelInfo:
    """What the metadata says of one file: its name and provenance, and how it is fed."""

    name: str
    description: str
    version: str
    author: str
    license: str
    class_names: tuple[str, ...]


class _Writer:
    """flatbuffers.Builder with the few helpers a table of the schema needs."""

    def __init__(self) -> None:
        self.b = flatbuffers.Builder(1024)

    def string(self, text: str) -> int:
        return self.b.CreateString(text)

    def floats(self, values: Sequence[float]) -> int:
        return self.b.CreateNumpyVector(np.asarray(values, np.float32))

    def tables(self, offsets: Sequence[int]) -> int:
        self.b.StartVector(4, len(offsets), 4)
        for offset in reversed(offsets):
            self.b.PrependUOffsetTRelative(offset)
        return self.b.EndVector()

    def table(self, slots: int, fields: dict[int, int], bytes_: dict[int, int] | None = None):
        """A table of `slots` fields: offsets by slot, and one-byte enums by slot."""
        self.b.StartObject(slots)
        for slot, value in (bytes_ or {}).items():
            self.b.PrependUint8Slot(slot, value, 0)
        for slot, offset in fields.items():
            self.b.PrependUOffsetTRelativeSlot(slot, offset, 0)
        return self.b.EndObject()

    def stats(self, low: float, high: float) -> int:
        """Stats{max, min}: the tensor's value range."""
        return self.table(2, {0: self.floats([high]), 1: self.floats([low])})


def _input_tensor(w: _Writer, float_input: bool) -> int:
    """The image input: RGB, pixels 0-255; float inputs get mean 0, std 1 (the model rescales
    inside), which MediaPipe requires of a float input and applies as (pixel - 0) / 1."""
    image = w.table(2, {}, {0: _RGB})
    content = w.table(3, {1: image}, {0: _IMAGE_PROPERTIES})
    units = []
    if float_input:
        options = w.table(2, {0: w.floats([0.0]), 1: w.floats([1.0])})
        units.append(w.table(2, {1: options}, {0: _NORMALIZATION_OPTIONS}))
    fields = {
        0: w.string("image"),
        1: w.string(
            "RGB image, pixels 0-255 ("
            + ("float32, the model rescales inside" if float_input else "uint8, q = pixel")
            + ")"
        ),
        3: content,
        5: w.stats(0.0, 255.0),
    }
    if units:
        fields[4] = w.tables(units)
    return w.table(7, fields)


def _output_tensor(w: _Writer, info: ModelInfo) -> int:
    """The class probabilities, their axis labelled by the packed labels file."""
    labels = w.table(
        5,
        {0: w.string(LABELS_FILE), 1: w.string("Class names, line i = class i")},
        {2: _TENSOR_AXIS_LABELS},
    )
    content = w.table(3, {1: w.table(0, {})}, {0: _FEATURE_PROPERTIES})
    fields = {
        0: w.string("probabilities"),
        1: w.string(f"Probabilities of the {len(info.class_names)} classes (softmax, sum 1)"),
        3: content,
        5: w.stats(0.0, 1.0),
        6: w.tables([labels]),
    }
    return w.table(7, fields)


def metadata_buffer(info: ModelInfo, float_input: bool) -> bytes:
    """The ModelMetadata flatbuffer (identifier M001) of an image classifier file: float32
    pixels 0-255 in (NormalizationOptions mean 0, std 1), or uint8 pixels."""
    w = _Writer()
    inputs = w.tables([_input_tensor(w, float_input)])
    outputs = w.tables([_output_tensor(w, info)])
    subgraph = w.table(10, {0: w.string("image_classifier"), 2: inputs, 3: outputs})
    fields = {
        0: w.string(info.name),
        1: w.string(info.description),
        2: w.string(info.version),
        3: w.tables([subgraph]),
        4: w.string(info.author),
        5: w.string(info.license),
        7: w.string(MIN_PARSER_VERSION),
    }
    w.b.Finish(w.table(8, fields), file_identifier=FILE_IDENTIFIER)
    return bytes(w.b.Output())


def _labels_zip(class_names: Sequence[str]) -> bytes:
    """labels.txt as a zip archive, appended after the flatbuffer the way the writers do."""
    archive = io.BytesIO()
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr(LABELS_FILE, labels_text(class_names))
    return archive.getvalue()


def with_metadata(tflite: bytes, info: ModelInfo) -> bytes:
    """`tflite` with `info` as its TFLITE_METADATA (replacing any) and the labels packed."""
    model = schema.ModelT.InitFromPackedBuf(tflite, 0)
    graph = model.subgraphs[0]
    float_input = graph.tensors[graph.inputs[0]].type == schema.TensorType.FLOAT32
    buffer = metadata_buffer(info, float_input)
    model.buffers.append(schema.BufferT(np.frombuffer(buffer, np.uint8)))
    entry = schema.MetadataT()
    entry.name, entry.buffer = METADATA_NAME, len(model.buffers) - 1
    kept = [m for m in (model.metadata or []) if _name(m) != METADATA_NAME]
    model.metadata = [*kept, entry]
    return packed_model(model, len(tflite) + 4096) + _labels_zip(info.class_names)


def _name(entry: schema.MetadataT) -> str:
    name = entry.name
    return name.decode() if isinstance(name, bytes) else str(name)


def read_metadata(data: bytes) -> bytes | None:
    """The TFLITE_METADATA buffer of a .tflite file's bytes, or None when it has none."""
    model = schema.Model.GetRootAs(data, 0)
    for i in range(model.MetadataLength()):
        entry = model.Metadata(i)
        if entry.Name().decode() == METADATA_NAME:
            return model.Buffers(entry.Buffer()).DataAsNumpy().tobytes()
    return None
