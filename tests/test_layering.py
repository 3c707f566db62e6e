"""The package: one import root (`toolkit`) in the wheel, a CLI that starts without Keras or a
backend, works without TensorFlow for the commands that do not need it, imports that point one
way between the core and the stage packages (export, verify, bench, cli) and between the core's
own layers, no import cycle, and no function over 80 lines."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest
from blockers import blocker_code

# Makes TensorFlow and tf2onnx look uninstalled: `import` raises ModuleNotFoundError and
# importlib.util.find_spec returns None, as on a JAX-only or runtime-only install.
NO_TENSORFLOW = blocker_code(("tensorflow", "tf2onnx"))


def _without_tensorflow(code: str, tmp_path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", NO_TENSORFLOW + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )


def test_parser_builds_without_tensorflow(tmp_path):
    """`toolkit --help` and the help of train/eval/predict/bench/presets import no TensorFlow."""
    proc = _without_tensorflow(
        """
        import contextlib, io, json, sys
        from toolkit.cli.main import main

        helps = {}
        for argv in (["--help"], ["train", "--help"], ["eval", "--help"],
                     ["predict", "--help"], ["bench", "--help"], ["presets", "--help"]):
            out = io.StringIO()
            with contextlib.redirect_stdout(out):
                try:
                    main(argv)
                except SystemExit as exc:
                    assert exc.code == 0, (argv, exc.code)
            helps[" ".join(argv)] = out.getvalue()
        print(json.dumps({"helps": helps, "tf": "tensorflow" in sys.modules
                          and sys.modules["tensorflow"] is not None}))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["tf"] is False
    helps = result["helps"]
    for name in ("train", "eval", "export", "verify", "bench", "presets"):
        assert name in helps["--help"]
    assert "--model" in helps["train --help"]
    assert "--data" in helps["eval --help"]
    assert "--classes" in helps["presets --help"]
    assert "usage: toolkit predict" in helps["predict --help"]
    assert "--interleaved" in helps["bench --help"]  # an export folder is benched without it


def test_converter_commands_say_tensorflow_is_missing(tmp_path):
    """export, verify and demo without TensorFlow: one line naming it, exit 2 (bench needs it
    for no export folder: tests/test_bench.py benches one without TensorFlow, Keras or JAX)."""
    proc = _without_tensorflow(
        """
        import json
        from toolkit.cli.main import main

        codes = {name: main([name, "some-run"]) for name in ("export", "verify")}
        codes["export --help"] = main(["export", "--help"])
        codes["demo"] = main(["demo"])
        print(json.dumps(codes))
        """,
        tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    codes = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(codes.values()) == {2}, codes
    errors = proc.stderr.strip().splitlines()
    assert len(errors) == len(codes), proc.stderr
    assert "Traceback" not in proc.stderr
    for line, name in zip(errors, codes, strict=True):
        command = name.split()[0]
        assert line.startswith(f"toolkit: error: toolkit {command} needs TensorFlow"), line
        assert "pip install" in line and "tensorflow" in line
    assert "tf2onnx" in errors[0]
    assert list(tmp_path.iterdir()) == []


# -- dependencies point one way inside the one import root: the core (every module of toolkit/
# outside the five stage packages) <- toolkit.export <- toolkit.verify, core <- toolkit.bench;
# toolkit.ship over those three; toolkit.cli on top --

ROOT = Path(__file__).resolve().parent.parent
STAGES = ("toolkit.export", "toolkit.verify", "toolkit.bench", "toolkit.ship", "toolkit.cli")
CORE = "toolkit"  # what is not in a stage
MAY_NOT_IMPORT = {
    CORE: (*STAGES, "studies"),
    "toolkit.export": ("toolkit.verify", "toolkit.bench", "toolkit.ship", "toolkit.cli", "studies"),
    "toolkit.verify": ("toolkit.bench", "toolkit.ship", "toolkit.cli", "studies"),
    # format facts are the core's: bench needs no converter
    "toolkit.bench": ("toolkit.export", "toolkit.verify", "toolkit.ship", "toolkit.cli", "studies"),
    "toolkit.ship": ("toolkit.cli", "studies"),
    "toolkit.cli": ("studies",),
}


def layer_of(module: str) -> str:
    """The stage package `module` belongs to, or CORE."""
    return next((s for s in STAGES if module == s or module.startswith(s + ".")), CORE)


def _module_name(path: Path, root: Path = ROOT) -> str:
    return ".".join(path.relative_to(root).with_suffix("").parts)


def _imported(path: Path, root: Path = ROOT) -> list[tuple[int, str]]:
    """(line, module) of every import in `path`, at any depth (functions included), relative
    imports resolved (`from M import n` gives M and M.n), and `importlib.import_module("...")`
    calls with a literal name."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(root).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = (".".join([*base, node.module or ""]) if node.level else node.module).strip(
                "."
            )
            found.append((node.lineno, module))  # and `from toolkit import export`'s submodule:
            found += [(node.lineno, f"{module}.{alias.name}") for alias in node.names]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def _wrong_imports(root: Path = ROOT) -> list[str]:
    wrong = []
    for path in sorted((root / "toolkit").rglob("*.py")):
        higher = MAY_NOT_IMPORT[layer_of(_module_name(path, root))]
        for line, module in _imported(path, root):
            if any(module == h or module.startswith(h + ".") for h in higher):
                wrong.append(f"{path.relative_to(root)}:{line} imports {module}")
    return wrong


def test_imports_point_one_way():
    """No module of a lower layer imports a higher one, not even inside a function."""
    assert _wrong_imports() == []


def test_the_layer_scan_sees_a_core_module_importing_a_stage(tmp_path):
    (tmp_path / "toolkit" / "bench").mkdir(parents=True)
    (tmp_path / "toolkit" / "core.py").write_text("def f():\n    from toolkit.export import x\n")
    (tmp_path / "toolkit" / "bench" / "b.py").write_text("import toolkit.verify.verifier\n")
    assert _wrong_imports(tmp_path) == [
        "toolkit/bench/b.py:1 imports toolkit.verify.verifier",
        "toolkit/core.py:2 imports toolkit.export",
        "toolkit/core.py:2 imports toolkit.export.x",
    ]


def test_the_import_scan_sees_imports_inside_functions():
    """The CLI composes the packages in its runners: the scan must see those imports."""
    modules = {layer_of(module) for _, module in _imported(ROOT / "toolkit" / "cli" / "main.py")}
    assert {"toolkit.export", "toolkit.verify", "toolkit.bench"} <= modules


def _private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """`from X import _name` where X is in another layer than `path` (core or a stage)."""
    own = layer_of(_module_name(path, root))
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            if node.module.split(".")[0] == "toolkit" and layer_of(node.module) != own:
                found += [
                    f"{path.relative_to(root)}:{node.lineno} imports {node.module}.{a.name}"
                    for a in node.names
                    if a.name.startswith("_")
                ]
    return found


def test_no_package_imports_a_private_name_of_another():
    """A name with a leading underscore is its package's own: another package that needs it
    gets it made public first."""
    wrong = [
        line for path in sorted((ROOT / "toolkit").rglob("*.py")) for line in _private_imports(path)
    ]
    assert wrong == []


def test_the_private_import_scan_sees_one(tmp_path):
    module = tmp_path / "toolkit" / "verify" / "probe.py"
    module.parent.mkdir(parents=True)
    module.write_text(
        "from toolkit.runtimes.litert import _hidden, public\nfrom toolkit.verify import _own\n"
    )
    assert _private_imports(module, tmp_path) == [
        "toolkit/verify/probe.py:1 imports toolkit.runtimes.litert._hidden"
    ]


# -- inside the core, layers point one way too: a module imports its own layer and those below
# it, never one above (imports inside functions count); lowest first. Each module of the core
# is in one layer: a new one fails test_every_core_module_has_a_layer until it is placed. --

CORE_LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "small shared utilities",
        ("toolkit.common", "toolkit.accuracy", "toolkit.formats"),
    ),
    ("the layers, each with its NumPy reference", ("toolkit.ops",)),
    ("the --data registry and pipelines", ("toolkit.data",)),
    ("presets, builders, MAC counts", ("toolkit.models",)),
    (
        "the run folder's files, read and written without Keras",
        ("toolkit.runfiles",),
    ),
    ("a model's top-1/top-5 on a split", ("toolkit.evaluate",)),
    ("training", ("toolkit.training",)),
    ("Keras for a stage: every custom object registered", ("toolkit.keras_setup",)),
    ("a run's model loaded and checked, `toolkit eval`", ("toolkit.runmodel",)),
    ("the runtimes", ("toolkit.runtimes",)),
    ("a run's uses: predict", ("toolkit.predict",)),
)
ROOT_MODULE = "toolkit"  # the import root: on top, its API names imported on first use


def core_layer(module: str) -> int | None:
    """The index in CORE_LAYERS of the core module `module` (or of a name in it), None when
    no layer holds it; the import root is above them all."""
    if module == ROOT_MODULE:
        return len(CORE_LAYERS)
    for index, (_, prefixes) in enumerate(CORE_LAYERS):
        if any(module == p or module.startswith(p + ".") for p in prefixes):
            return index
    return None


def _core_modules(root: Path = ROOT) -> dict[str, Path]:
    """Core module name -> its file (a package by its own name)."""
    modules = {
        _module_name(p, root).removesuffix(".__init__"): p for p in (root / "toolkit").rglob("*.py")
    }
    return {name: path for name, path in sorted(modules.items()) if layer_of(name) == CORE}


def _upward_core_imports(root: Path = ROOT) -> list[str]:
    """`path:line imports module` for each import, in a core module, of a module of a higher
    core layer (one per line: `from M import n` reports M)."""
    wrong = []
    for name, path in _core_modules(root).items():
        own = core_layer(name)
        lines = set()
        for line, module in _imported(path, root):
            if module == ROOT_MODULE or layer_of(module) != CORE or line in lines:
                continue
            target = core_layer(module) if module.startswith("toolkit.") else None
            if own is not None and target is not None and target > own:
                wrong.append(f"{path.relative_to(root)}:{line} imports {module}")
                lines.add(line)
    return wrong


def test_every_core_module_has_a_layer():
    unplaced = [name for name in _core_modules() if core_layer(name) is None]
    assert unplaced == [], "add each to CORE_LAYERS (tests/test_layering.py)"


def test_core_layers_point_one_way():
    """No core module imports one of a higher core layer, not even inside a function."""
    assert _upward_core_imports() == []


def test_the_core_layer_scan_sees_an_upward_import(tmp_path):
    """models/ importing keras_setup inside a function (it registers objects from training/)
    is found; importing down (errors) or within a layer is not."""
    (tmp_path / "toolkit" / "models").mkdir(parents=True)
    (tmp_path / "toolkit" / "models" / "counts.py").write_text(
        "from toolkit.common.errors import UsageError\nfrom toolkit.models import presets\n\n"
        "def f():\n    from toolkit.keras_setup import setup_keras\n"
    )
    (tmp_path / "toolkit" / "common").mkdir()
    (tmp_path / "toolkit" / "common" / "errors.py").write_text(
        "from toolkit.common import atomic\n"
    )
    assert _upward_core_imports(tmp_path) == [
        "toolkit/models/counts.py:5 imports toolkit.keras_setup"
    ]


def _custom_objects(root: Path = ROOT) -> dict[str, str]:
    """`toolkit>Name` -> its module, for each class a core module registers with
    `@keras.saving.register_keras_serializable(package="toolkit")`."""
    found = {}
    for name, path in _core_modules(root).items():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef) and any(
                "register_keras_serializable" in ast.unparse(d) for d in node.decorator_list
            ):
                found[f"toolkit>{node.name}"] = name
    return found


def test_setup_keras_registers_every_custom_object(tmp_path):
    """A model saved with any of the core's custom objects loads after `setup_keras()` alone
    (safe_mode, no custom_objects): it imports every module that registers one."""
    names = _custom_objects()
    assert {"toolkit>ClassToken", "toolkit>PartialShift", "toolkit>WarmupCosine"} <= set(names)
    code = (
        "import json\n"
        "from toolkit.keras_setup import setup_keras\n"
        "setup_keras()\n"
        "import keras\n"
        f"print(json.dumps([n for n in {sorted(names)!r}"
        " if keras.saving.get_registered_object(n) is None]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    missing = json.loads(done.stdout.strip().splitlines()[-1])
    assert missing == [], {n: names[n] for n in missing}


# -- no function over 80 lines (def to its last line), nested ones and methods included --

MAX_FUNCTION_LINES = 80


def _long_functions(root: Path = ROOT, limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """`path:name (N lines)` for each function under toolkit/ longer than `limit` lines."""
    found = []
    for path in sorted((root / "toolkit").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1
                if lines > limit:
                    found.append(f"{path.relative_to(root)}:{node.name} ({lines} lines)")
    return found


def test_no_function_is_over_80_lines():
    assert _long_functions() == [], "split each into named steps"


def test_the_length_scan_counts_def_to_last_line(tmp_path):
    """80 lines pass; a method of 81 (def, 79 statements and a last line) is found."""
    (tmp_path / "toolkit").mkdir()
    body = "x = 1\n" * 79
    method = "async def long(self):\n" + textwrap.indent(body + "return x\n", "    ")
    (tmp_path / "toolkit" / "m.py").write_text(
        "def short():\n"
        + textwrap.indent(body, "    ")
        + "\n\nclass C:\n"
        + textwrap.indent(method, "    ")
    )
    assert _long_functions(tmp_path) == ["toolkit/m.py:long (81 lines)"]


# -- one import root, and a light start ------------------------------------------------------

HEAVY = ("tensorflow", "keras", "jax", "torch", "tf2onnx", "onnx", "ai_edge_litert", "mediapipe")


def test_the_wheel_installs_one_import_root(tmp_path):
    """The built wheel holds the package `toolkit` (and its metadata) alone, with the shipped
    preset counts."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation"]
        + ["-w", str(tmp_path), str(ROOT)],
        check=True,
        capture_output=True,
    )
    (wheel,) = tmp_path.glob("toolkit-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert {n.split("/")[0] for n in names} == {"toolkit", "toolkit-0.1.0.dist-info"}
    assert "toolkit/models/preset_counts.json" in names
    assert "toolkit/export/__init__.py" in names and "toolkit/cli/main.py" in names


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["presets"],
        ["train", "--help"],
        ["eval", "--help"],
        ["predict", "--help"],
        ["bench", "--help"],
        ["export", "--help"],
        ["verify", "--help"],
        ["ship", "--help"],
        ["demo", "--help"],
    ],
    ids=" ".join,
)
def test_the_cli_starts_without_a_backend(argv, tmp_path):
    """On the full install, `toolkit --help`, `toolkit presets` and every command's help import
    no Keras, backend, converter or runtime: the converters' commands (export, verify, ship,
    demo) too, which without TensorFlow refuse before their help
    (test_converter_commands_say_tensorflow_is_missing)."""
    code = (
        "import json, sys, contextlib, io\n"
        "from toolkit.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
        "    try:\n"
        f"        code = main({argv!r})\n"
        "    except SystemExit as exc:\n"
        "        code = exc.code\n"
        f"print(json.dumps([code, out.getvalue(), sorted(set({HEAVY!r}) & set(sys.modules))]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    status, printed, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert status in (0, None) and printed, done.stderr
    assert heavy == []
    letters = "".join(printed.split())  # however argparse wraps (at hyphens too)
    if argv == ["export", "--help"]:  # the defaults the converters use, read without them
        assert "opset17to23(default23;" in letters and "(default500," in letters
    if argv == ["verify", "--help"]:
        assert "(defaultall:shift,shifted-patches,spt,lsa,shiftvit-block,vit-block)" in letters
    if argv == ["presets"]:
        assert "| shiftvit | shift-b | Shift-B |" in printed and "89,026,152" in printed


def _import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the toolkit modules it imports (at any depth), package __init__s by their
    package's name; `import toolkit` itself (the light root) is left out."""
    modules = {
        _module_name(p, root).removesuffix(".__init__"): p for p in (root / "toolkit").rglob("*.py")
    }
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        deps = set()
        for _, module in _imported(path, root):
            parts = module.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            found = ".".join(parts)
            if found and found not in (name, "toolkit") and not name.startswith(found + "."):
                deps.add(found)
        graph[name] = deps
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_between_modules_not_even_inside_functions():
    assert _cycles(_import_graph()) == []


def test_the_cycle_scan_sees_one_inside_a_function(tmp_path):
    (tmp_path / "toolkit").mkdir()
    (tmp_path / "toolkit" / "a.py").write_text("from toolkit.b import x\n")
    (tmp_path / "toolkit" / "b.py").write_text("def f():\n    from toolkit import a\n")
    assert _cycles(_import_graph(tmp_path)) == [["toolkit.a", "toolkit.b"]]


def test_the_public_api_is_imported_on_first_use(tmp_path):
    """`import toolkit` imports nothing heavy; each public name then resolves to the stage's
    own object (toolkit.export is the package, toolkit.export_run its function)."""
    code = (
        "import json, sys\n"
        "import toolkit\n"
        f"light = sorted(set({HEAVY!r}) & set(sys.modules))\n"
        "names = {n: type(getattr(toolkit, n)).__name__ for n in toolkit.__all__}\n"
        "same = toolkit.export.export_run is toolkit.export_run\n"
        "print(json.dumps([light, names, same]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=True
    )
    light, names, same = json.loads(done.stdout.strip().splitlines()[-1])
    assert light == [] and same
    assert names == {
        "train": "function",
        "TrainOptions": "type",
        "export_run": "function",
        "verify_run": "function",
        "bench_run": "function",
        "ship_run": "function",
        "open_run": "function",
        "load_run_model": "function",
        "export": "module",
        "verify": "module",
        "bench": "module",
        "ship": "module",
        "__version__": "str",
    }
