"""config.json: what `toolkit train` records of a run (its options, preset, data and model
input), written when training starts and read by every later stage."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from toolkit.common.errors import UsageError
from toolkit.runfiles import jsonfile
from toolkit.runfiles.jsonfile import integer, section, text

CONFIG_FILE = "config.json"
WRITER = "toolkit train"
RETRAIN = "retrain the run"

# keys `toolkit train` writes that every later stage relies on: (path, what it is)
REQUIRED = (
    (("options", "model"), "the model name"),
    (("options", "preset"), "the preset name"),
    (("options", "data"), "the training data spec"),
    (("options", "seed"), "the split seed"),
    (("preset", "arch", "image_size"), "the model's image size"),
    (("dataset", "image_shape"), "the input shape"),
    (("dataset", "num_classes"), "the class count"),
)


@dataclass(frozen=True)
class RunConfig:
    """config.json of a run: the fields later stages use, typed; `raw` is the file as written."""

    model: str
    preset: str
    data: str
    seed: int
    image_size: int
    image_shape: tuple[int, int, int]
    num_classes: int
    preprocessing: str | None  # "rescale" or "normalize" (None: older runs; the model's own)
    val_fraction: float | None  # the preset's held-out share (None: the data's own split)
    norm_stats: tuple[list, list] | None  # (mean, variance) per channel of "normalize" runs
    options: Mapping[str, object]  # every `toolkit train` option as given (author, license...)
    preset_json: Mapping[str, object]  # the preset as `Preset.to_dict` wrote it
    dataset: Mapping[str, object]  # name, synthetic, image_shape, num_classes, splits
    raw: Mapping[str, object] = field(repr=False, compare=False, default_factory=dict)

    @classmethod
    def from_json(cls, data: Mapping, where: str = CONFIG_FILE) -> RunConfig:
        """The config in `data` (config.json's object, read from `where`); one that lacks what
        `toolkit train` writes about the model is a UsageError."""
        problem = config_problem(data)
        if problem is not None:
            raise UsageError(
                f"{where} does not describe a toolkit model ({problem}): use a run folder "
                "written by `toolkit train`, or train one with `toolkit train --model NAME`"
            )
        options, preset, dataset = (section(data, k) for k in ("options", "preset", "dataset"))
        fraction = section(preset, "train").get("val_fraction")
        return cls(
            model=str(options["model"]),
            preset=str(options["preset"]),
            data=str(options["data"]),
            seed=int(options["seed"]),
            image_size=int(preset["arch"]["image_size"]),
            image_shape=tuple(dataset["image_shape"]),
            num_classes=int(dataset["num_classes"]),
            preprocessing=text(data.get("preprocessing")),
            val_fraction=None if fraction is None else float(fraction),
            norm_stats=_norm_stats(data.get("norm_stats")),
            options=options,
            preset_json=preset,
            dataset=dataset,
            raw=dict(data),
        )

    def to_json(self) -> dict:
        """The object config.json holds (as `toolkit train` wrote it)."""
        return dict(self.raw)

    def option(self, name: str, default: object = None) -> object:
        """The `toolkit train` option `name` as recorded (`default` when not recorded)."""
        value = self.options.get(name)
        return default if value is None else value

    @property
    def dataset_name(self) -> str:
        """The data's name as train recorded it (else its `--data` spec)."""
        return str(self.dataset.get("name") or self.data)

    @property
    def train_recipe(self) -> Mapping[str, object]:
        """The preset's training recipe as recorded (batch_size, epochs, augmentation...)."""
        return section(self.preset_json, "train")

    @property
    def distribution(self) -> Mapping[str, object]:
        """How train placed the run (strategy, replicas...; {} for runs that lack it)."""
        return section(self.raw, "distribution")

    @property
    def test_images(self) -> int | None:
        """How many images the test split had at training (None: not recorded)."""
        return integer(section(self.dataset, "splits").get("test"))


def _norm_stats(value: object) -> tuple[list, list] | None:
    """config.json's norm_stats [mean, variance] as a pair, or None (none recorded)."""
    if isinstance(value, list | tuple) and len(value) == 2:
        return (list(value[0]), list(value[1]))
    return None


def config_problem(data: Mapping) -> str | None:
    """What keeps config.json's object `data` from describing a toolkit model, or None."""
    from toolkit.models import PRESETS  # plain data, no Keras: the model names

    for keys, what in REQUIRED:
        if _lookup(data, keys) is None:
            return f"no {'.'.join(keys)} ({what})"
    model = data["options"]["model"]
    if model not in PRESETS:
        return f"options.model '{model}' is not one of the toolkit's models ({', '.join(PRESETS)})"
    shape = data["dataset"]["image_shape"]
    if not (isinstance(shape, list) and len(shape) == 3 and all(isinstance(d, int) for d in shape)):
        return f"dataset.image_shape {shape!r} is not [height, width, channels]"
    classes = data["dataset"]["num_classes"]
    if integer(classes) is None or classes < 1:
        return f"dataset.num_classes {classes!r} is not a positive integer"
    if integer(data["options"]["seed"]) is None:
        return f"options.seed {data['options']['seed']!r} is not an integer"
    return None


def _lookup(data: object, keys: tuple[str, ...]) -> object:
    for key in keys:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def config_path(folder: Path) -> Path:
    """Where a run folder's config.json is."""
    return Path(folder) / CONFIG_FILE


def has_config(folder: Path) -> bool:
    """Whether `folder` has a config.json (is, or was begun as, a run folder of train)."""
    return config_path(folder).is_file()


def read_config(folder: Path) -> RunConfig:
    """The run's config.json; missing, unreadable or not a toolkit model's is a UsageError."""
    if not has_config(folder):
        raise UsageError(f"{folder} has no {CONFIG_FILE}: it is not a run folder of `{WRITER}`")
    path = config_path(folder)
    return RunConfig.from_json(jsonfile.parse(path, RETRAIN), str(path))


def find_config(folder: Path) -> RunConfig | None:
    """The run's config.json, or None when the folder has none (unreadable: UsageError)."""
    return read_config(folder) if has_config(folder) else None


def read_config_json(folder: Path) -> dict:
    """config.json's object as written, unchecked: for `toolkit train --resume`, which reads
    an unfinished run's options back; missing or unreadable is a UsageError."""
    path = config_path(folder)
    return jsonfile.load(path, RETRAIN, f"{folder} has no {CONFIG_FILE}")


def write_config(folder: Path, data: Mapping | RunConfig) -> Path:
    """Write config.json (`toolkit train`'s object, or a RunConfig's) atomically; its path."""
    path = config_path(folder)
    jsonfile.write(path, data.to_json() if isinstance(data, RunConfig) else dict(data))
    return path
