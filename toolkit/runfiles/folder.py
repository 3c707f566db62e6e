"""The run folder: what `toolkit train` writes and every later stage reads."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from toolkit.common.errors import UsageError, first_line
from toolkit.runfiles import (
    BENCH_FILE,
    Manifest,
    RunConfig,
    config_path,
    has_config,
    manifest_path,
    read_config,
    read_manifest,
)

# the JSON files' names (toolkit.runfiles holds them), re-exported beside the other files'
from toolkit.runfiles import CONFIG_FILE as CONFIG_FILE
from toolkit.runfiles import EXPORT_DIR as EXPORT_DIR
from toolkit.runfiles import MANIFEST_FILE as MANIFEST_FILE
from toolkit.runfiles import VERIFY_FILE as VERIFY_FILE

MODEL_FILE = "model.keras"
HISTORY_FILE = "history.csv"
HISTORY_PLOT_FILE = "history.png"
METRICS_FILE = "metrics.json"
LABELS_FILE = "labels.txt"
CHECKPOINT_DIR = "checkpoint"
LOCK_FILE = ".train.lock"  # flock-ed by the `toolkit train` writing the folder; see hold_run_folder
# what `toolkit verify` and `toolkit bench` write into the run folder
VERIFY_LAYERS_PLOT = "verify_layers.png"
BENCH_FILES = (BENCH_FILE, "bench.md", "bench.png")
BENCH_TOP1_FILE = "bench_top1.json"  # each file's top-1 by data spec and sha256: a cache
# `toolkit bench --interleaved`: every CPU file timed side by side in one process
BENCH_INTERLEAVED_FILES = ("bench_interleaved.json", "bench_interleaved.md")


def labels_text(class_names: list[str] | tuple[str, ...]) -> str:
    """LABELS_FILE's content: class i on line i (train, export and the packed .tflite labels)."""
    return "\n".join(class_names) + "\n"


def read_labels(path: Path, num_classes: int, fix: str) -> list[str]:
    """LABELS_FILE's class names, line i class i, checked as `toolkit train` checks class names
    (no control characters: a \\r would split a name in the packed .tflite labels) and against
    the model's `num_classes`; any other file is a UsageError ending in `or FIX`."""
    try:
        text = path.read_bytes().decode("utf-8")  # not read_text: it turns \r into \n
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{path} cannot be read ({first_line(exc)}): save it as UTF-8, or {fix}"
        ) from exc
    return parse_labels(text, num_classes, str(path), fix)


def parse_labels(text: str, num_classes: int, where: str, fix: str) -> list[str]:
    """The class names of LABELS_FILE content `text` (from `where`: a file, or the labels packed
    in a .tflite), checked by `check_labels`."""
    names = text.split("\n")  # as labels_text joins them: only \n ends a line
    if names[-1] == "":
        names.pop()
    return check_labels(names, num_classes, where, fix)


def check_labels(names: list[str], num_classes: int, where: str, fix: str) -> list[str]:
    """`names` (from `where`), checked as `read_labels` checks a LABELS_FILE's lines: no control
    characters, one per model output; else a UsageError ending in `or FIX`."""
    from toolkit.data.dataset import check_class_name_characters  # train's rule

    check_class_name_characters(names, where, f"write the names without them, or {fix}")
    if len(names) != num_classes:
        raise UsageError(
            f"{where} has {len(names)} class names but the model has {num_classes} classes: "
            f"write one name per line (line i: class i), or {fix}"
        )
    return names


@dataclass(frozen=True)
class Run:
    """A finished run folder on disk and its config.json."""

    path: Path
    config: RunConfig

    def __post_init__(self) -> None:
        """A config given as config.json's object is read as `RunConfig.from_json` reads it."""
        if isinstance(self.config, Mapping):
            where = str(config_path(self.path))
            object.__setattr__(self, "config", RunConfig.from_json(self.config, where))

    @property
    def class_names(self) -> list[str]:
        """The run's classes from labels.txt (`read_labels`: one per model output, no control
        characters); a missing or bad labels.txt is a UsageError."""
        path = self.path / LABELS_FILE
        if not path.is_file():
            raise UsageError(
                f"{self.path} has no {LABELS_FILE}: the run's classes are unknown; retrain the run"
            )
        fix = f"retrain the run (`toolkit train` writes {LABELS_FILE})"
        return read_labels(path, self.config.num_classes, fix)

    @property
    def seed(self) -> int:
        """The seed `toolkit train` split the data with: every later split and draw uses it."""
        return self.config.seed

    @property
    def val_fraction(self) -> float | None:
        """The share of the training images `toolkit train` held out for validation (its
        preset's `val_fraction`; None: the data's own split): every later split uses it."""
        return self.config.val_fraction

    @property
    def export_dir(self) -> Path:
        """RUN/export: where `toolkit export` writes by default."""
        return self.path / EXPORT_DIR

    def manifest(self) -> Manifest:
        """RUN/export/model.json; UsageError saying how to create it when missing or unreadable."""
        how = f"run `toolkit export {self.path} --format all` first"
        missing = f"{self.path} has no exported models ({manifest_path(self.export_dir)} not found)"
        return read_manifest(self.export_dir, how, missing)


@contextmanager
def hold_run_folder(out: Path) -> Iterator[Path]:
    """Hold an exclusive flock on OUT/.train.lock (creating OUT) so that one `toolkit train`
    at a time writes a run folder; a second one is a UsageError. Yields the lock file. POSIX
    only: where there is no flock (Windows), the folder is not guarded.

    The OS drops a flock when its process dies, so a lock file a killed run left blocks
    nothing. On leaving, the lock file goes, and so do the folders this call created when
    nothing else was written into them (a refusal leaves no trace).
    """
    out = Path(out)
    created = [folder for folder in (out, *out.parents) if not folder.exists()]
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_FILE
    fd = _lock(lock, out)
    try:
        yield lock
    finally:
        lock.unlink(missing_ok=True)  # while held: a waiting opener re-checks the inode
        os.close(fd)
        for folder in created:  # deepest first; a folder with files in it stays
            try:
                folder.rmdir()
            except OSError:
                break


def _lock(lock: Path, out: Path) -> int:
    """An fd holding the flock of `lock`; UsageError when another process holds it."""
    try:
        import fcntl  # POSIX: Linux and macOS
    except ImportError:  # Windows: no flock; the folder is not guarded there
        return os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UsageError(
                f"run folder {out} is being written by another `toolkit train` (it holds "
                f"{lock}): wait for it to finish, or pass another --out"
            ) from None
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:  # else its holder removed it between our open and flock: take the new one
            return fd
        os.close(fd)


def open_run(path: str | Path) -> Run:
    """Open a finished run folder, checking the files every later stage needs."""
    path = Path(path)
    if not path.exists():
        raise UsageError(f"run folder {path} does not exist: pass the --out of `toolkit train`")
    if not path.is_dir():
        raise UsageError(f"{path} is not a run folder: pass the folder `toolkit train` wrote")
    if not has_config(path):
        raise UsageError(f"{path} has no {CONFIG_FILE}: it is not a run folder of `toolkit train`")
    if not (path / MODEL_FILE).is_file():
        raise UsageError(
            f"{path} has no {MODEL_FILE}: the run did not finish; continue it with "
            f"`toolkit train --out {path} --resume`"
        )
    return Run(path=path, config=read_config(path))
