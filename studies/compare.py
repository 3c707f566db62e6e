"""Repeatability: the p50 of each row in two bench.json files, and how far apart they are.

python -m studies.compare RUN/bench.json OTHER/bench.json [--tolerance 0.10]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from toolkit.common.argtypes import finite_float


def differences(first: dict, second: dict) -> list[dict]:
    """Rows ok in both: p50 of each and |a - b| / min(a, b)."""
    key = ("format", "runtime", "batch")
    other = {tuple(r[k] for k in key): r for r in second["rows"] if r["status"] == "ok"}
    out = []
    for row in first["rows"]:
        match = other.get(tuple(row[k] for k in key))
        if row["status"] != "ok" or match is None:
            continue
        a, b = row["p50_ms"], match["p50_ms"]
        out.append({**{k: row[k] for k in key}, "p50_a": a, "p50_b": b,
                    "difference": abs(a - b) / min(a, b)})  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--tolerance", type=finite_float, default=0.10)
    args = parser.parse_args(argv)
    rows = differences(*(json.loads(p.read_text()) for p in (args.first, args.second)))
    print("| format | runtime | batch | p50 A ms | p50 B ms | difference |")
    print("|---|---|---:|---:|---:|---:|")
    for r in rows:
        mark = "" if r["difference"] <= args.tolerance else " (over)"
        print(
            f"| {r['format']} | {r['runtime']} | {r['batch']} | {r['p50_a']:.3f} | "
            f"{r['p50_b']:.3f} | {r['difference']:.1%}{mark} |"
        )
    within = sum(r["difference"] <= args.tolerance for r in rows)
    print(f"\n{within} of {len(rows)} rows within {args.tolerance:.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
