"""``python -m bench {run,smoke,soak,micro,profile,scale,memdiff,report}`` — see ``docs/BENCHMARKS.md``
for what each measures."""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

from bench.procs import ROOT


def _run(args: argparse.Namespace) -> int:
    from bench.run import Settings, main

    s = Settings()
    if args.quick:
        s.duration_s, s.reps, s.warmup_s = 2.0, 1, 0.5
        s.probe_ttfb, s.probe_streams = 100, 20
        s.soak_requests, s.soak_warmup = 20_000, 5_000
        s.quick_micro = True
        s.write_docs = args.docs
    if args.duration is not None:
        s.duration_s = args.duration
    if args.reps is not None:
        s.reps = args.reps
    if args.concurrency:
        s.concurrencies = tuple(args.concurrency)
    if args.soak_requests is not None:
        s.soak_requests = args.soak_requests
    s.litellm = not args.no_litellm
    s.micro = not args.no_micro
    s.scale = not args.no_scale
    s.baseline = args.baseline
    if args.no_docs:
        s.write_docs = False
    return main(s)


def _smoke(args: argparse.Namespace) -> int:
    """Seconds, not minutes: every part of the harness once, tiny loads, results in a temp dir.
    Never asserts timings; fails only when the harness itself breaks."""
    from bench.run import Settings, main

    t0 = time.monotonic()
    out = Path(tempfile.mkdtemp(prefix="omniroute-bench-smoke-"))
    s = Settings(
        duration_s=1.0, reps=1, concurrencies=(4,), warmup_s=0, litellm=False, probe_ttfb=20,
        probe_streams=3, soak_requests=400, soak_warmup=100, soak_verdict=False, quick_micro=True,
        allow_python_load=True, out_dir=out, docs_dir=out, command="python -m bench smoke",
    )
    main(s)  # raises when the harness breaks; timings and the soak verdict are not judged
    print(f"bench smoke: harness OK in {time.monotonic() - t0:.0f}s (results and report in {out}; "
          "timings are not checked)")
    return 0


def _soak(args: argparse.Namespace) -> int:
    from bench.soak import main

    return main(args.requests, args.warmup)


def _micro(args: argparse.Namespace) -> int:
    import orjson

    from bench import micro

    rows = micro.run(quick=args.quick)
    micro.print_rows(rows)
    if not args.quick:
        out = ROOT / "bench" / "results"
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"micro-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}.json"
        path.write_bytes(orjson.dumps(rows, option=orjson.OPT_INDENT_2))
        print(f"\nresults: {path}")
    return 0


def _profile(args: argparse.Namespace) -> int:
    from bench.profile import main

    if args.baseline_src:
        from bench.profile import compare

        return compare(str(args.baseline_src), args.reps, args.duration, args.concurrency)
    return main(args.duration, args.concurrency, args.rate)


def _scale(args: argparse.Namespace) -> int:
    from bench.scale import main

    return main(args.duration, args.concurrency, args.reps)


def _memdiff(args: argparse.Namespace) -> int:
    from bench.memdiff import main

    return main(args.requests, args.warmup)


def _report(args: argparse.Namespace) -> int:
    from bench.report import main

    return main(args.results, args.docs_dir, args.baseline)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="the full benchmark: JSON, docs/BENCHMARKS.md, docs/bench.png")
    r.add_argument("--quick", action="store_true", help="2 s cells, 1 repetition, 20k soak; docs untouched")
    r.add_argument("--docs", action="store_true", help="with --quick: write the docs anyway")
    r.add_argument("--no-docs", action="store_true", help="write the JSON only")
    r.add_argument("--duration", type=float, help="seconds per cell (default 5)")
    r.add_argument("--reps", type=int, help="repetitions (default 2)")
    r.add_argument("--concurrency", type=int, action="append", help="repeatable (default 1, 16, 64)")
    r.add_argument("--soak-requests", type=int, help="0 skips the soak (default 200000)")
    r.add_argument("--no-litellm", action="store_true", help="skip (d) LiteLLM")
    r.add_argument("--no-micro", action="store_true", help="skip the micro-benchmarks")
    r.add_argument("--no-scale", action="store_true",
                   help="skip the per-chunk CPU, Redis-state and --workers 2 rows")
    r.add_argument("--baseline", type=Path, help="an earlier results JSON: adds a before/after table")
    r.set_defaults(fn=_run)
    sub.add_parser("smoke", help="seconds: check the harness end to end (CI)").set_defaults(fn=_smoke)
    s = sub.add_parser("soak", help="200,000 requests with RSS sampled every second")
    s.add_argument("--requests", type=int, default=200_000)
    s.add_argument("--warmup", type=int, default=20_000)
    s.set_defaults(fn=_soak)
    m = sub.add_parser("micro", help="micro-benchmarks")
    m.add_argument("--quick", action="store_true")
    m.set_defaults(fn=_micro)
    f = sub.add_parser("profile", help="CPU µs per request and a py-spy profile per gateway route")
    f.add_argument("--duration", type=float, default=5.0, help="seconds per cell (default 5)")
    f.add_argument("--concurrency", type=int, default=64)
    f.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    f.add_argument("--baseline-src", type=Path,
                   help="another tree's src: A/B of CPU µs/req against it instead of a profile")
    f.add_argument("--reps", type=int, default=3, help="with --baseline-src: alternations")
    f.set_defaults(fn=_profile)
    c = sub.add_parser("scale", help="per-chunk CPU, Redis-state cost and --workers 2 vs 1 (printed)")
    c.add_argument("--duration", type=float, default=3.0)
    c.add_argument("--concurrency", type=int, default=64)
    c.add_argument("--reps", type=int, default=2)
    c.set_defaults(fn=_scale)
    d = sub.add_parser("memdiff", help="tracemalloc diff of the gateway across many requests")
    d.add_argument("--requests", type=int, default=40_000)
    d.add_argument("--warmup", type=int, default=10_000)
    d.set_defaults(fn=_memdiff)
    p = sub.add_parser("report", help="re-render docs/BENCHMARKS.md from a results JSON")
    p.add_argument("results", type=Path)
    p.add_argument("--baseline", type=Path)
    p.add_argument("--docs-dir", type=Path, default=ROOT / "docs")
    p.set_defaults(fn=_report)
    args = ap.parse_args(argv)
    return int(args.fn(args))


if __name__ == "__main__":
    sys.exit(main())
