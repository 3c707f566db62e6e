"""`toolkit ship RUN [--max-accuracy-drop P] [--target T,...] [--out DIR] [--serve]`: arguments
and runner for the CLI table. Imports nothing heavy at parse time."""

from __future__ import annotations

import argparse
import sys

from toolkit.common.argtypes import ALL, finite_float, path_arg
from toolkit.ship.picks import DEFAULT_MAX_DROP
from toolkit.ship.serve import DEFAULT_PORT
from toolkit.ship.targets import TARGETS


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Arguments of `toolkit ship`."""
    p.add_argument(
        "run", type=path_arg, metavar="RUN", help="run folder written by `toolkit train`"
    )
    p.add_argument(
        "--max-accuracy-drop",
        type=finite_float,
        default=DEFAULT_MAX_DROP,
        metavar="P",
        help="ship per target the fastest file whose test top-1 is at most P points (0 to "
        f"100) below the float model's (default {DEFAULT_MAX_DROP:g}); none within: exit 2",
    )
    p.add_argument(
        "--target",
        "--targets",
        dest="target",
        default=ALL,
        metavar="T[,T...]",
        help=f"comma list of {', '.join(TARGETS)} (default {ALL})",
    )
    p.add_argument(
        "--out",
        type=path_arg,
        metavar="DIR",
        help="bundle folder (default RUN/ship); of an earlier bundle there, the files ship "
        "wrote are replaced and any others kept",
    )
    p.add_argument(
        "--bench-seconds",
        type=finite_float,
        metavar="T",
        help="when ship benches: seconds of timed calls per row (default: toolkit bench's)",
    )
    p.add_argument(
        "--serve",
        action="store_true",
        help="then serve the bundle on 127.0.0.1 (report.html, web/) until Ctrl-C",
    )
    p.add_argument(
        "--port",
        type=int,
        metavar="N",
        help=f"--serve: the port (default {DEFAULT_PORT}; 0: any free one)",
    )


def pick_table(picks: dict) -> str:
    """The picks as a terminal table."""
    from toolkit.ship.card import change

    rows = [("target", "file", "format", "ranked on", "p50 ms", "top-1", "change", "agreement")]
    for name, p in picks.items():
        agreement = "-" if p.agreement is None else f"{p.agreement:.2%}"
        rows.append(
            (
                name,
                p.file,
                p.format,
                p.runtime,
                f"{p.p50_ms:.3f}",
                f"{p.top1:.2%}",
                change(p),
                agreement,
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows)
    return "\n".join(line.rstrip() for line in lines)


def run(args: argparse.Namespace) -> int:
    """Ship, print the picks and the bundle; with --serve, serve it until interrupted."""
    from toolkit.common.errors import UsageError
    from toolkit.export.conversion_error import ExportError
    from toolkit.ship.bundle import SHIP_DIR, ship_run
    from toolkit.ship.names import REPORT_FILE, WEB_DIR
    from toolkit.ship.owned import kept_line
    from toolkit.ship.serve import bind, url

    if args.port is not None and not args.serve:
        raise UsageError("--port applies to --serve: add --serve, or drop --port")
    server = None
    if args.serve:  # a taken port is refused before the work
        out = args.out if args.out is not None else args.run / SHIP_DIR
        server = bind(out, DEFAULT_PORT if args.port is None else args.port)
    try:
        shipped = ship_run(
            args.run,
            targets=args.target,
            max_drop=args.max_accuracy_drop,
            out=args.out,
            bench_seconds=args.bench_seconds,
            quiet=False,
        )
        if shipped.stages.nothing:
            print("export, verify.json and bench.json are current: reused")
        print(pick_table(shipped.picks))
        print(f"bundle: {shipped.out} ({len(shipped.files)} files)")
        if shipped.kept is not None and (line := kept_line(shipped.out, shipped.kept)):
            print(line)
        if server is None:
            return 0
        print(f"serving {shipped.out} at {url(server)} (Ctrl-C stops)", flush=True)
        print(f"  report:  {url(server, REPORT_FILE)}")
        if "web" in shipped.picks:
            print(f"  web app: {url(server, WEB_DIR + '/')}", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            print("stopped serving", file=sys.stderr)
        return 0
    except ExportError as exc:
        print(f"toolkit: export failed: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.server_close()
