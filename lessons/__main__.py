"""python -m lessons [NN ...] [--quick] [--out DIR]: run the lessons (see lessons/__init__.py)."""
import sys

from lessons._numerics import pin

if __name__ == "__main__":
    if "--native" not in sys.argv[1:]:
        pin()                                   # before NumPy and numba load (lessons/_numerics.py)
    from lessons._runner import main
    sys.exit(main())
