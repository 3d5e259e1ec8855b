"""A learner's helper module, imported by uses_a_helper.py: its variance keeps a wrong axis."""
import numpy as np


def centred(x, axis):
    return x - x.mean(axis=axis, keepdims=True)


def variance(x, axis):
    return np.mean(centred(x, axis) ** 2, axis=axis + 2, keepdims=True)
