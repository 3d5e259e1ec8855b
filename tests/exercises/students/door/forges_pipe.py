"""A wrong backward (dx all zeros) whose module, at import, finds the checker's pipe back to the parent (through
gc, else the callers' frames), sends it a report that says correct, and ends the process before the check runs."""
import gc
import os
import sys
from multiprocessing.connection import Connection

import numpy as np


def _pipe():
    found = [o for o in gc.get_objects() if isinstance(o, Connection) and o.writable]
    frame = sys._getframe()
    while frame is not None and not found:
        found = [v for v in frame.f_locals.values() if isinstance(v, Connection) and v.writable]
        frame = frame.f_back
    return found[0]


_report = {"exercise": "layernorm", "ok": True, "diagnoses": ["correct"], "gradients": {}, "notes": [],
           "unfinished": [], "error": "", "errors": {}, "contract": ""}
_text = "scratchnorm exercise 'layernorm'\ndiagnosis: correct"
_pipe().send(("correct", _text, _report))        # a report that says correct, pickled as a Connection sends it
os._exit(0)


def layernorm_forward(x, gamma, beta, ln_param):
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + ln_param["eps"]))


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    return np.zeros_like(dout), (dout * xhat).sum(axis=0), dout.sum(axis=0)
