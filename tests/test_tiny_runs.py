"""The shared tiny runs are made once per session, also by pytest-xdist workers that need the
same run at the same time (tests/tiny_runs.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tiny_runs import made_once

TESTS = Path(__file__).resolve().parent


def _maker(log: Path, fail: bool = False):
    def make(path: Path) -> None:
        with log.open("a") as f:
            f.write("made\n")
        path.mkdir()
        (path / "half").write_text("written")
        if fail:
            raise RuntimeError("killed while making")

    return make


def test_two_processes_wanting_one_run_make_it_once(tmp_path):
    """Both processes get the path; the maker ran once (it sleeps inside, the other waits)."""
    code = textwrap.dedent(
        f"""
        import time
        from pathlib import Path
        from tiny_runs import made_once

        def make(path):
            with open({str(tmp_path / "log")!r}, "a") as f:
                f.write("made\\n")
            time.sleep(0.5)
            path.mkdir()

        print(made_once(Path({str(tmp_path / "run")!r}), make))
        """
    )
    env = {"PYTHONPATH": str(TESTS)}
    procs = [
        subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
        for _ in range(2)
    ]
    outs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert outs == [str(tmp_path / "run")] * 2
    assert (tmp_path / "log").read_text() == "made\n"


def test_a_run_whose_making_failed_is_made_again_from_nothing(tmp_path):
    log, run = tmp_path / "log", tmp_path / "run"
    with pytest.raises(RuntimeError):
        made_once(run, _maker(log, fail=True))
    assert made_once(run, _maker(log)) == run  # the half-made folder removed, not reused
    assert made_once(run, _maker(log)) == run  # made: reused
    assert log.read_text() == "made\n" * 2
