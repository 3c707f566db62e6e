"""The benchmark result as a terminal table and as bench.md (same columns, one table each)."""

from __future__ import annotations

from collections.abc import Callable

from toolkit.bench import web
from toolkit.bench.machine import cpu_text
from toolkit.formats import FORMATS

MB = 1 << 20


def _num(key: str, fmt: str, scale: float = 1.0) -> Callable[[dict], str]:
    def cell(row: dict) -> str:
        value = row.get(key)
        return "-" if value is None else format(value * scale, fmt)

    return cell


def _status(row: dict) -> str:
    return row["status"]


# header -> cell of a row; the terminal and the markdown table share it
COLUMNS: dict[str, Callable[[dict], str]] = {
    "format": lambda r: r["format"],
    "runtime": lambda r: r["runtime"] + (f" {r['backend']}" if r.get("backend") else ""),
    "batch": lambda r: str(r["batch"]),
    "status": _status,
    "threads": lambda r: "-" if r.get("threads") is None else str(r["threads"]),
    "p50 ms": _num("p50_ms", ".3f"),
    "p90 ms": _num("p90_ms", ".3f"),
    "p99 ms": _num("p99_ms", ".3f"),
    "mean±std ms": lambda r: (
        "-" if r.get("mean_ms") is None else f"{r['mean_ms']:.3f}±{r['std_ms']:.3f}"
    ),
    "img/s": _num("images_per_s", ".0f"),
    "spread": _num("spread", ".1%"),
    "load ms": _num("load_ms", ".0f"),
    "first ms": _num("first_ms", ".1f"),
    "peak RSS MB": _num("peak_rss_mb", ".0f"),
    "size MB": _num("size_bytes", ".2f", 1 / MB),
    "top-1": _num("top1", ".2%"),
    "GMAC/s": _num("gmacs", ".1f"),
    "of peak": _num("roofline_fraction", ".0%"),
    "of roofline": _num("attainable_fraction", ".0%"),
    "x Keras": _num("speedup_vs_keras", ".2f"),
}
RIGHT = {h for h in COLUMNS if h not in ("format", "runtime", "status")}


def _cells(rows: list[dict]) -> list[list[str]]:
    return [[cell(r) for cell in COLUMNS.values()] for r in rows]


def reasons(rows: list[dict]) -> list[str]:
    """One line per row that did not run: which row, and why."""
    return [
        f"{r['format']} on {COLUMNS['runtime'](r)} (batch {r['batch']}): {r['status']}: "
        f"{r['reason']}"
        for r in rows
        if r["status"] != "ok"
    ]


def terminal_table(result: dict) -> str:
    """Aligned text table of every row, then the reasons of rows that did not run."""
    headers = list(COLUMNS)
    body = _cells(result["rows"])
    widths = [max([len(h), *(len(c[i]) for c in body)]) for i, h in enumerate(headers)]

    def line(cells: list[str]) -> str:
        return "  ".join(
            c.rjust(w) if h in RIGHT else c.ljust(w)
            for c, w, h in zip(cells, widths, headers, strict=True)
        ).rstrip()

    out = [line(headers), line(["-" * w for w in widths]), *(line(c) for c in body)]
    out += [""] + roofline_lines(result) if result["roofline"]["peaks"] else []
    notes = (*not_measured(result), *format_notes(result), *reasons(result["rows"]))
    out += [f"  {text}" for text in notes]
    return "\n".join(out)


def format_notes(result: dict) -> list[str]:
    """What a timed format costs on a CPU and why, as its FORMATS row says (the .ort)."""
    formats = dict.fromkeys(row["format"] for row in result["rows"] if row["status"] == "ok")
    return [
        f"{FORMATS[f].filename}: {FORMATS[f].cpu_note}"
        for f in formats
        if f in FORMATS and FORMATS[f].cpu_note
    ]


def not_measured(result: dict) -> list[str]:
    """What this bench did not measure and why: top-1, and MACs, GMAC/s and the roofline (an
    export folder benched without its run)."""
    lines = []
    if why := result.get("data", {}).get("not_computed"):
        lines.append(f"top-1: not computed: {why}")
    if why := result["roofline"].get("not_available"):
        macs = any(row.get("gmacs") is not None for row in result["rows"])
        what = "the roofline" if macs else "MACs, GMAC/s and the roofline"
        lines.append(f"{what}: not available: {why}")
    if any(web.is_web(row["runtime"]) for row in result["rows"]):
        lines.append(f"of peak, of roofline: {web.NO_ROOFLINE}")
    return lines


def web_lines(rows: list[dict]) -> list[str]:
    """The library and browser each web runtime's rows ran in (their `providers`), one line
    per distinct setup."""
    web_rows = [r for r in rows if web.is_web(r["runtime"])]
    return list(
        dict.fromkeys(f"- {r['runtime']}: {p}" for r in web_rows for p in r.get("providers", []))
    )


def roofline_lines(result: dict) -> list[str]:
    """Each runtime's measured matmul peak and memory bandwidth, and the fastest fp32/int8
    artifacts against their peak and against the per-layer roofline (bench/roofline.py)."""
    roof = result["roofline"]
    n = roof["peaks"][0]["shape"][0]
    lines = [f"roofline: peak = fastest call of a {n}x{n}x{n} matmul, per runtime and precision"]
    for p in roof["peaks"]:
        figure = f"{p['peak_gmacs']:.1f} GMAC/s" if p["status"] == "ok" else p["reason"]
        lines.append(f"  {p['runtime']} {p['precision']}: {figure}")
    for m in roof.get("memory", []):
        shape = "x".join(map(str, m["shape"]))
        if m["status"] != "ok":
            figure = m["reason"]
        elif m.get("gbs") is None:
            figure = "no slower than a one-column call: reads cost nothing measurable"
        else:
            figure = f"{m['gbs']:.1f} GB/s"
        lines.append(
            f"  {m['runtime']} memory for {m['for']} weights: {figure} (fastest call of a "
            f"{shape} {m['precision']} matmul over the model's {m['weight_bytes'] / MB:.3g} "
            "MiB, net of a one-column call)"
        )
    for f in roof["fastest"]:
        frac = "-" if f["roofline_fraction"] is None else f"{f['roofline_fraction']:.0%}"
        gmacs = "-" if f["gmacs"] is None else f"{f['gmacs']:.1f}"
        line = (
            f"  fastest {f['precision']} at batch {f['batch']}: {f['format']} on {f['runtime']}, "
            f"{f['p50_ms']:.3f} ms, {gmacs} GMAC/s = {frac} of peak"
        )
        if f.get("attainable_fraction") is not None:
            line += (
                f", {f['attainable_fraction']:.0%} of the {f['attainable_gmacs']:.1f} GMAC/s "
                f"its layers allow ({f['weight_bytes'] / MB:.1f} MiB of weights; "
                f"{f['memory_bound_share']:.0%} of that time in memory-bound layers)"
            )
        lines.append(line)
    for what in roof.get("above_roof", []):
        lines.append(
            f"  warning: {what}: the machine was slower while the roofline was timed, so "
            "this run's fractions overstate; bench again, or compare files side by side "
            "with `toolkit bench FOLDER --interleaved`"
        )
    return lines


def settings_lines(rows: list[dict]) -> list[str]:
    """One line per runtime whose rows say how its sessions were set up (ORT's options)."""
    seen: dict[str, dict] = {}
    for row in rows:
        if row.get("settings"):
            seen.setdefault(row["runtime"], row["settings"])
    return [
        f"- {runtime} session: " + ", ".join(f"{k} {v}" for k, v in settings.items())
        for runtime, settings in seen.items()
    ]


def _budget(protocol: dict) -> str:
    """A protocol's stop: "N runs or S s"."""
    runs, seconds = protocol["runs"], protocol["seconds"]
    return " or ".join(
        x for x in (f"{runs} runs" if runs else "", f"{seconds} s" if seconds else "") if x
    )


def web_protocol_lines(protocol: dict) -> list[str]:
    """How the web-* rows were timed, when there were any."""
    w = protocol.get("web")
    if not w:
        return []
    return [
        f"- web-* rows: {w['warmup']} warmup calls, then {_budget(w)}; threads {w['threads']}; "
        f"{w['timer']}"
    ]


def markdown(result: dict) -> str:
    """bench.md: what ran where, the table, the roofline and the reasons."""
    m = result["machine"]
    v = m["versions"]
    proto = result["protocol"]
    budget = _budget(proto)
    data = result["data"]
    kind = result.get("kind", "run folder")
    top1 = (
        f"- top-1 on the test split of {data['spec'] or 'the run data'}"
        f" ({data['samples'] or '?'} images), computed once per file on its default runtime"
        " (the web-* rows': in the browser, by that runtime)"
    )
    lines = [
        f"# toolkit bench: {result['model']} {result['preset']} ({kind} {result['run']})",
        "",
        f"- command: `{result['command']}`",
        f"- date: {result['date']}",
        f"- machine: {cpu_text(m)}, {m['cores']} cores, load average {m['load_average']}"
        + (f", GPU {m['gpu']}" if m["gpu"] else ", no GPU"),
        "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        f"- protocol: {proto['warmup']} warmup calls, then {budget}; threads "
        f"{proto['threads'] or 'runtime default'}; {proto['timer']}",
        *([] if data.get("not_computed") else [top1]),
        "- spread: (max - min) / median of the p50 of 5 consecutive slices of the timed calls",
        *settings_lines(result["rows"]),
        *web_protocol_lines(proto),
        *web_lines(result["rows"]),
        *([f"- top-1 not computed: {data['error']}"] if data.get("error") else []),
        *(f"- {line}" for line in not_measured(result)),
        *(f"- {line}" for line in format_notes(result)),
        "",
    ]
    headers = list(COLUMNS)
    lines.append("| " + " | ".join(headers) + " |")
    lines.append("|" + "|".join("---:" if h in RIGHT else "---" for h in headers) + "|")
    lines += ["| " + " | ".join(c) + " |" for c in _cells(result["rows"])]
    if result["roofline"]["peaks"]:
        head, *items = roofline_lines(result)
        lines += ["", head[0].upper() + head[1:] + ":", "", *(f"- {i.strip()}" for i in items)]
    if why := reasons(result["rows"]):
        lines += ["", "Rows that did not run:", "", *(f"- {w}" for w in why)]
    return "\n".join(lines) + "\n"
