"""The parity record `toolkit verify` leaves in each artifact's model.json entry: what the last
verify measured on that very file (sha256), in which runtime versions, against which tolerance,
so an app team can see from the bundle alone what was proven.
"""

from __future__ import annotations

from pathlib import Path

from toolkit.runfiles import edit_manifest
from toolkit.runfiles.hashes import sha256
from toolkit.runtimes import RUNTIMES

LOGIT_FIGURES = ("max_abs", "cosine", "top1_agreement", "top1_delta")


def runtime_version(runtime: str, found: dict[str, str]) -> str | None:
    """The version of the package behind `runtime` (its row's `package`) in `found` (a
    versions() dict); None for a runtime without one, or one this toolkit does not know."""
    row = RUNTIMES.get(runtime)
    return None if row is None or row.package is None else found.get(row.package)


def _model_part(c: dict) -> dict:
    m = c.get("metrics") or {}
    return {
        "status": c["status"],
        "tolerance": c.get("tolerance"),
        "logits": {k: m[k] for k in LOGIT_FIGURES if k in m},
        **({"reason": c["reason"]} if c.get("reason") else {}),
    }


def _layer_part(c: dict) -> dict:
    out: dict = {"status": c["status"], "tolerance": c.get("tolerance")}
    if c.get("reason"):
        out["reason"] = c["reason"]
    rows = [r for r in c.get("boundaries", []) if "metrics" in r]
    if not rows:
        return out
    sqnr = [r["metrics"]["sqnr_db"] for r in rows if r["metrics"]["sqnr_db"] is not None]
    steps = [r["metrics"]["max_steps"] for r in rows if r["metrics"].get("max_steps") is not None]
    first = c.get("first_divergence")
    out.update(
        boundaries=len(c["boundaries"]),
        found=len(rows),
        min_sqnr_db=min(sqnr) if sqnr else None,
        min_cosine=min(r["metrics"]["cosine"] or 0.0 for r in rows),
        first_divergence=None if first is None else first["layer"],
    )
    if steps:
        out["max_steps"] = max(steps)
    return out


def parity_records(report: dict) -> dict[str, dict]:
    """format -> its parity record from the report's model and layer cells (measured ones)."""
    records: dict[str, dict] = {}
    parts = (("models", "model", _model_part), ("layers", "layers", _layer_part))
    for level, key, part in parts:
        section = report.get(level)
        if not section:
            continue
        for c in section["cells"]:
            if c["status"] in ("unavailable", "n/a"):
                continue
            record = records.setdefault(
                c["format"],
                {
                    "verified": report["date"],
                    "samples": {},
                    "data": section.get("data"),
                    "file": c.get("file"),
                    "sha256": c.get("sha256"),
                    "runtimes": {},
                },
            )
            record["samples"][key] = section.get("samples")
            record["sha256"] = record["sha256"] or c.get("sha256")
            runtime = record["runtimes"].setdefault(c["runtime"], {})
            runtime["version"] = runtime_version(c["runtime"], report.get("versions", {}))
            runtime[key] = part(c)
    return records


def record_parity(export_dir: Path, report: dict) -> list[str]:
    """Write each measured artifact's parity record into export_dir/model.json (atomically);
    the formats updated. A record replaces the one of an earlier verify."""
    updated: list[str] = []

    def with_parity(manifest: dict) -> dict | None:
        artifacts = manifest.get("artifacts") or {}
        for fmt, record in parity_records(report).items():
            entry = artifacts.get(fmt)
            if not isinstance(entry, dict):
                continue
            file = export_dir / str(entry.get("file", ""))
            if record["sha256"] is None and file.is_file():
                record["sha256"] = sha256(file)
            record["matches_export"] = record["sha256"] == entry.get("sha256")
            entry["parity"] = record
            updated.append(fmt)
        return manifest if updated else None

    edit_manifest(export_dir, with_parity)
    return updated
