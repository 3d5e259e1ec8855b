"""python -m scratchnorm.gradcheck [--backend numpy|numba|all] [--verbose]

Checks every layer of the library (gradcheck/cases.py) against central
finite differences in float64, prints one line per case and backend (the
worst relative error, the coarsest resolution its tensors reached and the
worst error in units of the resolution), and exits non-zero if any check
fails. --verbose prints every tensor's row.
"""
from __future__ import annotations

import argparse
import sys
import time

from .cases import all_cases


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.gradcheck", description=__doc__.splitlines()[2])
    ap.add_argument("--backend", choices=("numpy", "numba", "all"), default="all")
    ap.add_argument("--verbose", action="store_true", help="print each tensor's row")
    args = ap.parse_args(argv)
    backends = ("numpy", "numba") if args.backend == "all" else (args.backend,)
    t0 = time.perf_counter()
    failed = []
    print(f"{'case':<42} {'backend':<8} {'input':<14} {'max rel err':>11} {'resolution':>10} {'err/res':>8}  status")
    for case in all_cases():
        for backend in backends:
            layer, report = case.check(backend)
            status = "ok" if report.ok else "FAIL"
            res = max(c.resolution for c in report.checks)
            over = max(c.err_over_res for c in report.checks)
            print(f"{case.label:<42} {backend:<8} {str(case.shape):<14} {report.max_rel_err:>11.2e} {res:>10.1e} "
                  f"{over:>8.2g}  {status}")
            if args.verbose or not report.ok:
                print(report)
            if not report.ok:
                failed.append(f"{case.label} [{backend}]")
    n = len(all_cases()) * len(backends)
    print(f"\n{n - len(failed)} passed, {len(failed)} failed ({time.perf_counter() - t0:.1f} s)")
    for f in failed:
        print(f"FAILED: {f}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
