"""python -m lessons [NN ...] [--quick] [--out DIR]: run the lessons (see lessons/__init__.py)."""
import sys

from lessons._runner import main

if __name__ == "__main__":
    sys.exit(main())
