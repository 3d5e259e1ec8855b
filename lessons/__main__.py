"""python -m lessons [NN ...] [--quick] [--out DIR]: run the lessons (see lessons/__init__.py).

``python -m lessons --alone PATH [args]`` is how a lesson run as a script (``python lessons/NN_name.py``)
reaches the runner (lessons/_common.py, ``start``)."""
import sys

from lessons._numerics import pin

if __name__ == "__main__":
    if "--native" not in sys.argv[1:]:
        pin()                                   # before NumPy and numba load (lessons/_numerics.py)
    if sys.argv[1:2] == ["--alone"] and len(sys.argv) > 2:
        from lessons._runner import run_alone
        sys.exit(run_alone(sys.argv[2], sys.argv[3:]))
    from lessons._runner import main
    sys.exit(main())
