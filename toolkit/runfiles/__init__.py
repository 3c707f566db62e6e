"""The run folder's JSON files, typed: one module per file, one missing-file policy.

- RUN/config.json (`toolkit train`): `RunConfig`; `read_config`, `find_config`, `write_config`
- EXPORT/model.json (`toolkit export`; verify adds parity records): `Manifest` of
  `ArtifactEntry`; `read_manifest`, `find_manifest`, `edit_manifest` (a stage's change),
  `write_manifest` (a bundle's whole file)
- RUN/verify.json (`toolkit verify`): `VerifyReport`, `ModelLevel`, `VerifyCell`;
  `read_verify`, `find_verify`, `write_verify`
- FOLDER/bench.json (`toolkit bench`): `BenchReport` of `BenchRow`; `read_bench`,
  `find_bench`, `write_bench`

`read_X(folder)`: the file, or a one-line UsageError naming the command that writes it when it
is missing; `find_X(folder)`: None when missing. Either way an unreadable or truncated file is a
one-line UsageError. Every type keeps the object as written (`raw`, `to_json()`), so files
round-trip byte for byte; keys older versions lacked read as None. No Keras is imported here.
"""

from toolkit.runfiles.bench import (
    BENCH_FILE,
    BenchReport,
    BenchRow,
    bench_path,
    find_bench,
    read_bench,
    write_bench,
)
from toolkit.runfiles.config import (
    CONFIG_FILE,
    RunConfig,
    config_path,
    find_config,
    has_config,
    read_config,
    read_config_json,
    write_config,
)
from toolkit.runfiles.manifest import (
    EXPORT_DIR,
    MANIFEST_FILE,
    MODEL_HASH,
    ArtifactEntry,
    Manifest,
    edit_manifest,
    find_manifest,
    has_manifest,
    manifest_path,
    read_manifest,
    write_manifest,
)
from toolkit.runfiles.verify import (
    VERIFY_FILE,
    ModelLevel,
    VerifyCell,
    VerifyReport,
    find_verify,
    read_verify,
    verify_path,
    write_verify,
)

__all__ = [
    "BENCH_FILE",
    "CONFIG_FILE",
    "EXPORT_DIR",
    "MANIFEST_FILE",
    "MODEL_HASH",
    "VERIFY_FILE",
    "ArtifactEntry",
    "BenchReport",
    "BenchRow",
    "Manifest",
    "ModelLevel",
    "RunConfig",
    "VerifyCell",
    "VerifyReport",
    "bench_path",
    "config_path",
    "edit_manifest",
    "find_bench",
    "find_config",
    "find_manifest",
    "find_verify",
    "has_config",
    "has_manifest",
    "manifest_path",
    "read_bench",
    "read_config",
    "read_config_json",
    "read_manifest",
    "read_verify",
    "verify_path",
    "write_bench",
    "write_config",
    "write_manifest",
    "write_verify",
]
