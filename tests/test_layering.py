"""Package layering: imports point one way (toolkit <- export <- bench <- cli), and the CLI works
without TensorFlow for the commands that do not need it."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
import textwrap
from pathlib import Path

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
        from cli.main import main

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
        from cli.main import main

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


# -- dependencies point one way: toolkit (core) <- export <- verify, toolkit <- bench; cli on top --

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("toolkit", "export", "verify", "bench", "cli")
MAY_NOT_IMPORT = {
    "toolkit": ("export", "verify", "bench", "cli", "studies"),
    "export": ("verify", "bench", "cli", "studies"),
    "verify": ("bench", "cli", "studies"),
    "bench": ("export", "verify", "cli", "studies"),  # format facts are the core's: no converters
    "cli": ("studies",),
}


def _imported(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import in `path`, at any depth (functions included), relative
    imports resolved, and `importlib.import_module("...")` calls with a literal name."""
    tree = ast.parse(path.read_text(), str(path))
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            module = ".".join([*base, node.module or ""]) if node.level else node.module
            found.append((node.lineno, module.strip(".")))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
        ):
            found.append((node.lineno, str(node.args[0].value)))
    return found


def test_imports_point_one_way():
    """No module of a lower layer imports a higher one, not even inside a function."""
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for package, higher in MAY_NOT_IMPORT.items()
        for path in sorted((ROOT / package).rglob("*.py"))
        for line, module in _imported(path)
        if module.split(".")[0] in higher
    ]
    assert wrong == []


def test_the_import_scan_sees_imports_inside_functions():
    """The CLI composes the packages in its runners: the scan must see those imports."""
    modules = {module for _, module in _imported(ROOT / "cli" / "main.py")}
    assert {"export", "verify", "bench", "toolkit.training.train"} <= modules


def _private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """`from PACKAGE.x import _name` where PACKAGE is another of the project's packages."""
    own = path.relative_to(root).parts[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            package = node.module.split(".")[0]
            if package in PACKAGES and package != own:
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
        line
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        for line in _private_imports(path)
    ]
    assert wrong == []


def test_the_private_import_scan_sees_one(tmp_path):
    module = tmp_path / "verify" / "probe.py"
    module.parent.mkdir()
    module.write_text(
        "from toolkit.runtimes.litert import _hidden, public\nfrom verify import _own\n"
    )
    assert _private_imports(module, tmp_path) == [
        "verify/probe.py:1 imports toolkit.runtimes.litert._hidden"
    ]
