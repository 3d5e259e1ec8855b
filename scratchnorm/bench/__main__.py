"""python -m scratchnorm.bench (see scratchnorm/bench/__init__.py)."""
import sys

from scratchnorm.bench.cli import main

sys.exit(main())
