"""python -m scratchnorm.bench: the command line (options, and the subprocess probes)."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from .._checks import fail
from .compare import COMPARE
from .door import door_table, run_door
from .first_call import compile_report, first_step_table, first_steps
from .grid import grid_table, run_grid
from .memory import probe_torch_memory
from .norms import NORMS, shape_str
from .fresh import run_fresh
from .peers import KERNEL_NORMS, PEER_SHAPES, peer_section, peer_tables
from .report import fresh_table, print_report, stalls_table, targets_table, training_table
from .roofline import copy_bandwidth, median_copy
from .runner import Context, bench_fused, bench_layers, bench_norm, environment, progress, rms_over_ln
from .targets import FRESH_TARGET, NAIVE_FRESH_TARGET, evaluate_targets
from .stalls import run_stalls
from .threads import CONFIGS, RECOMMENDED_PARALLEL_MIN, environ_for, in_this_process
from .training import run_training

DEFAULT_SHAPES = ("64x512", "1024x1024", "8192x4096")
QUICK_SHAPES = ("64x512", "128x1024")
DEFAULT_DTYPES = ("float32", "float64")


def parse_list(arg: str, choices, what: str) -> list[str]:
    items = [s.strip() for s in arg.split(",") if s.strip()]
    for s in items:
        if s not in choices:
            fail(argparse.ArgumentTypeError, f"--{what}", f"a comma-separated list of {', '.join(choices)}",
                 s, f"pass e.g. --{what} {','.join(choices[:2])}.")
    return items


def parse_shape(s: str) -> tuple[int, int]:
    parts = s.lower().split("x")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        fail(argparse.ArgumentTypeError, "--shapes", "comma-separated NxD with positive integers", s,
             "pass e.g. --shapes 64x512,4096x1024.")
    return int(parts[0]), int(parts[1])


def parse_rounds(s: str) -> int:
    if not (s.isdigit() and int(s) >= 1):
        fail(argparse.ArgumentTypeError, "--rounds", "an integer >= 1", s, "pass --rounds 5, say.")
    return int(s)


def parse_config(s: str) -> str:
    if s not in CONFIGS:
        fail(argparse.ArgumentTypeError, "--config", f"one of {', '.join(CONFIGS)}", s,
             "pass --config one (the library's default build against peers on one thread) or --config two "
             "(the opt-in against peers on two threads).")
    return s


def parse_args(argv):
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.bench",
                                 description="Time every normalization against the copy roofline, "
                                             "NumPy, PyTorch and JAX.")
    ap.add_argument("--norms", type=lambda s: parse_list(s, tuple(NORMS), "norms"), default=list(NORMS),
                    help=f"comma-separated, from {','.join(NORMS)} (default: all; missing ones are skipped)")
    ap.add_argument("--shapes", type=lambda s: [parse_shape(p) for p in s.split(",") if p.strip()],
                    help=f"comma-separated NxD (default {','.join(DEFAULT_SHAPES)}; --quick: "
                         f"{','.join(QUICK_SHAPES)})")
    ap.add_argument("--dtypes", type=lambda s: parse_list(s, DEFAULT_DTYPES, "dtypes"),
                    default=list(DEFAULT_DTYPES), help="float32,float64 (default both)")
    ap.add_argument("--quick", action="store_true",
                    help="tiny shapes, few repeats, three training steps, two models in fresh processes (15 s "
                         "with --no-compile and --no-fresh on a busy 2-core machine; the first-call probes compile "
                         "every kernel in a fresh cache, which took 100 s there)")
    ap.add_argument("--budget", type=float,
                    help="seconds of timed calls per figure (default 0.3; --quick 0.01)")
    ap.add_argument("--rounds", type=parse_rounds,
                    help="interleaved rounds per shape; each figure is the median of its rounds' medians "
                         "(default 5; --quick 2)")
    ap.add_argument("--config", type=parse_config, default="one",
                    help="the threads of every side (bench/threads.py): one (default): the library's serial build, "
                         "numba and torch on 1 thread, the twenty-line kernel serial; two: SCRATCHNORM_PARALLEL_MIN="
                         f"{RECOMMENDED_PARALLEL_MIN} (the README's value for large calls run alone), numba and torch "
                         "on 2 threads, the twenty-line prange kernel (the bench runs itself again in a new "
                         "interpreter when the variable differs)")
    ap.add_argument("--peers", action="store_true",
                    help="only the library against its peers on the configuration's threads (bench/peers.py): "
                         "LayerNorm, RMSNorm at " + ",".join(shape_str(s) for s in PEER_SHAPES) + " (--quick: "
                         f"{','.join(QUICK_SHAPES)}) float32 against the twenty-line kernel, torch.compile and NumPy, "
                         "and the layer grid against torch.nn")
    ap.add_argument("--door", action="store_true", help="only each LayerNorm and RMSNorm function minus its "
                    "serial kernel at 64x512 (bench/door.py; --peers prints it too)")
    ap.add_argument("--first-step", action="store_true",
                    help="only the first training step of a fresh process, with an empty numba cache (cold) and "
                         "the same cache again (warm) (bench/first_call.py)")
    ap.add_argument("--compare", type=lambda s: [] if s == "none" else parse_list(s, COMPARE, "compare"),
                    default=list(COMPARE), help="torch,torch_compile,jax (default, when importable; torch_compile "
                                                "needs torch and a C++ compiler, and compiles each shape first) "
                                                "or none")
    ap.add_argument("--no-compile", action="store_true", help="skip the first-call subprocesses")
    ap.add_argument("--grid", action="store_true",
                    help="only the layer-class grid against torch.nn (bench/grid.py); needs torch")
    ap.add_argument("--training", action="store_true",
                    help="only the training steps of the lessons' models, quiet and with one core busy "
                         "(bench/training.py)")
    ap.add_argument("--no-training", action="store_true", help="skip the training steps in a full run")
    ap.add_argument("--fresh", action="store_true",
                    help="only the training steps in fresh processes: each model and backend in a new interpreter, "
                         "as a learner's script, p50 and p90 per backend, quiet and with one core busy; the "
                         "processes keep the installed thread settings, --config's threads do not reach them "
                         "(bench/fresh.py)")
    ap.add_argument("--no-fresh", action="store_true", help="skip the fresh-process training steps in a full run")
    ap.add_argument("--stalls", action="store_true",
                    help="only the stall check: LayerNorm/RMSNorm calls with one core busy against the same "
                         "calls on one thread (bench/stalls.py)")
    ap.add_argument("--no-stalls", action="store_true", help="skip the stall check in a full run")
    ap.add_argument("--no-grid", action="store_true",
                    help="skip the grid in a full run (it runs when torch is installed, not with --quick)")
    ap.add_argument("--json", metavar="PATH",
                    help="write the results as JSON (schema in the module docstring)")
    ap.add_argument("--torch-memory", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.shapes is None:
        args.shapes = ([parse_shape(s) for s in QUICK_SHAPES] if args.quick
                       else list(PEER_SHAPES) if args.peers else [parse_shape(s) for s in DEFAULT_SHAPES])
    if args.budget is None:
        args.budget = 0.01 if args.quick else 0.3
    if args.rounds is None:
        args.rounds = 2 if args.quick else 5
    return args


def run(args) -> dict:
    ctx = Context(args)
    norms = [NORMS[n] for n in args.norms]
    report = {"schema": "scratchnorm-bench/2",
              "config": {"norms": args.norms, "shapes": [list(s) for s in args.shapes], "dtypes": args.dtypes,
                         "quick": args.quick, "budget_s": args.budget, "rounds": args.rounds,
                         "config": args.config, "threads": ctx.threads, "compare": args.compare},
              "threads": ctx.sides,
              "environment": environment(ctx), "notes": ctx.notes, "copy": [], "results": [], "layers": []}
    for shape in args.shapes:
        for dtype in args.dtypes:
            copies: list[dict] = []
            for norm in norms:
                report["results"] += bench_norm(ctx, norm, shape, dtype, copies)
            if not copies:                             # no norm ran: the roofline alone
                progress(f"{shape_str(shape)} {dtype}: copy")
                copies.append(copy_bandwidth(shape, dtype, ctx.budget, ctx.use_numba_copy))
            report["copy"].append(median_copy(copies))
            for norm in norms:
                if norm.layer and ctx.numba and any(r["norm"] == norm.name and r["impl"] == "numba_out"
                                                    for r in report["results"]):
                    report["layers"] += bench_layers(ctx, norm, shape, dtype)
    report["fused"] = [bench_fused(ctx, shape, dtype) for shape in args.shapes for dtype in args.dtypes
                       if dtype == "float32" and "rmsnorm" in args.norms and ctx.use_numba_copy]
    report["memory"] = ctx.memory
    report["grid"] = (run_grid(ctx.torch, ctx.budget, args.rounds, progress=progress)
                      if ctx.torch and not args.quick and not args.no_grid else None)
    report["training"] = (None if args.no_training
                          else run_training(ctx.torch, quick=args.quick, progress=progress))
    if ctx.threads == 1 and not args.no_stalls:       # the stalls compare numba's threads with one
        ctx.note("stalls: not run on one thread (--config one); `--stalls` alone runs them on numba's threads")
    report["stalls"] = (None if args.no_stalls or ctx.threads == 1
                        else run_stalls(quick=args.quick, progress=progress))
    report["fresh"] = None if args.no_fresh else run_fresh(quick=args.quick, progress=progress)
    report["rms_over_ln"] = rms_over_ln(report["results"])
    report["compile"] = ({"cold": None, "warm": None, "error": "skipped (--no-compile)"} if args.no_compile
                         else compile_report(ctx, norms, args.shapes, args.dtypes, args.quick))
    report["first_step"] = None if args.no_compile else first_steps(quick=args.quick, progress=progress)
    report["peers"] = peer_section(report)
    report["targets"] = evaluate_targets(report)
    return report


def run_peers_only(args, t0) -> int:
    """The library against its peers on the configuration's threads: the kernels and the grid (peers.py)."""
    if "jax" in args.compare:               # XLA keeps a pool of its own: not a peer on the configuration's threads
        args.compare = [c for c in args.compare if c != "jax"]
    ctx = Context(args)
    report = {"config": {"shapes": [list(s) for s in args.shapes], "config": args.config}, "threads": ctx.sides,
              "results": [], "notes": ctx.notes}
    for shape in args.shapes:
        for name in KERNEL_NORMS:
            report["results"] += bench_norm(ctx, NORMS[name], shape, "float32", [])
    report["grid"] = (run_grid(ctx.torch, ctx.budget, args.rounds, quick=args.quick, progress=progress)
                      if ctx.torch and not args.no_grid else None)
    report["peers"] = peer_section(report)
    report["door"] = run_door(ctx.budget, args.rounds, progress=progress)
    load = "-" if ctx.load is None else f"{ctx.load:.2f}"
    notes = f"1-minute load average before the run: {load}\n" + "".join(f"note: {n}\n" for n in ctx.notes)
    text = f"{notes}{peer_tables(report)}\n\n{door_table(report['door'])}"
    return print_section(args, t0, text, {"schema": "scratchnorm-bench-peers/1", **report},
                         f", {args.config}: {ctx.config.title}")


def run_grid_only(args, t0) -> int:
    ctx = Context(args)
    if not ctx.torch:
        print("error: --grid compares with torch.nn, which is not installed here. Fix: `make test-compare` "
              "installs the compare extra into .venv-compare; then run `.venv-compare/bin/python -m "
              "scratchnorm.bench --grid`.", file=sys.stderr)
        return 2
    rows = run_grid(ctx.torch, ctx.budget, args.rounds, quick=args.quick, progress=progress)
    return print_section(args, t0, grid_table(rows, ctx.config), {"schema": "scratchnorm-bench-grid/1",
                                                                  "threads": ctx.sides, "rows": rows},
                         f", {ctx.threads} threads each")


def run_training_only(args, t0) -> int:
    rows = run_training(Context(args).torch, quick=args.quick, progress=progress)
    return print_section(args, t0, training_table(rows), {"schema": "scratchnorm-bench-training/1", "rows": rows})


def run_fresh_only(args, t0) -> int:
    section = run_fresh(quick=args.quick, progress=progress)
    target = [t for t in evaluate_targets({"results": [], "layers": [], "fresh": section})
              if t["name"] in (FRESH_TARGET, NAIVE_FRESH_TARGET)]
    return print_section(args, t0, f"{fresh_table(section)}\n\n{targets_table(target)}",
                         {"schema": "scratchnorm-bench-fresh/1", **section, "targets": target})


def run_stalls_only(args, t0) -> int:
    rows = run_stalls(quick=args.quick, progress=progress)
    return print_section(args, t0, stalls_table(rows), {"schema": "scratchnorm-bench-stalls/1", "rows": rows})


def run_door_only(args, t0) -> int:
    rows = run_door(Context(args).budget, args.rounds, progress=progress)
    return print_section(args, t0, door_table(rows), {"schema": "scratchnorm-bench-door/1", "rows": rows})


def run_first_step_only(args, t0) -> int:
    section = first_steps(quick=args.quick, progress=progress)
    return print_section(args, t0, first_step_table(section), {"schema": "scratchnorm-bench-first-step/1", **section})


def print_section(args, t0, text: str, document: dict, note: str = "") -> int:
    """One section's table and the seconds it took; ``document`` written to --json when asked."""
    print(f"\n{text}\n({time.perf_counter() - t0:.1f} s{note})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(document, f, indent=1)
        print(f"wrote {args.json}")
    return 0


RERUN = "SCRATCHNORM_BENCH_RERUN"      # set in the interpreter main() starts for a configuration


def rerun(argv: list[str], config) -> int:
    """Run the bench again in a new interpreter with ``config``'s SCRATCHNORM_PARALLEL_MIN (read at import)."""
    if os.environ.get(RERUN):
        fail(RuntimeError, "SCRATCHNORM_PARALLEL_MIN in the bench's own new interpreter",
             f"the value of --config {config.key}", "scratchnorm.fast reading another",
             "check that scratchnorm.fast._jit reads SCRATCHNORM_PARALLEL_MIN at import.")
    progress(f"--config {config.key}: a new interpreter with " + (
        f"SCRATCHNORM_PARALLEL_MIN={config.parallel_min}" if config.parallel_min is not None
        else "SCRATCHNORM_PARALLEL_MIN unset"))
    env = {**environ_for(config), RERUN: "1"}
    return subprocess.run([sys.executable, "-m", "scratchnorm.bench", *argv], env=env).returncode


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    if args.torch_memory:
        print(json.dumps(probe_torch_memory(json.loads(args.torch_memory))))
        return 0
    if not in_this_process(CONFIGS[args.config]):
        return rerun(argv, CONFIGS[args.config])
    t0 = time.perf_counter()
    for flag, run_only in (("peers", run_peers_only), ("door", run_door_only), ("first_step", run_first_step_only),
                           ("grid", run_grid_only), ("training", run_training_only), ("stalls", run_stalls_only),
                           ("fresh", run_fresh_only)):          # one section alone
        if getattr(args, flag):
            return run_only(args, t0)
    report = run(args)
    report["wall_s"] = time.perf_counter() - t0
    print_report(report)
    print(f"\n({report['wall_s']:.1f} s)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print(f"wrote {args.json}")
    return 0

