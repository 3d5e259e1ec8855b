"""A wrong backward (dx all zeros) whose module, at import, finds the checker's pipe and the probe's seed in its
callers' frames, runs its own functions on the parent's inputs, sends them back in the checker's own format
(verdict.message) with a report that says correct, and ends the process before the check runs."""
import json
import os
import sys

import numpy as np


def layernorm_forward(x, gamma, beta, ln_param):
    mu, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
    xhat = (x - mu) / np.sqrt(var + ln_param["eps"])
    return gamma * xhat + beta, (xhat, gamma, np.sqrt(var + ln_param["eps"]))


def layernorm_backward(dout, cache):
    xhat, gamma, std = cache
    return np.zeros_like(dout), (dout * xhat).sum(axis=0), dout.sum(axis=0)


def _forge():
    from scratchnorm.exercises import verdict
    frame = sys._getframe()
    while frame is not None and not {"conn", "seed"} <= set(frame.f_locals):
        frame = frame.f_back
    conn, seed = frame.f_locals["conn"], frame.f_locals["seed"]
    contract = verdict.contract_of("layernorm", "layernorm",
                                   {"forward": layernorm_forward, "backward": layernorm_backward})
    report = {"exercise": "layernorm", "ok": True, "diagnoses": ["correct"], "gradients": {}, "notes": [],
              "unfinished": [], "error": "", "errors": {}, "contract": ""}
    text = json.dumps(report) if frame.f_locals.get("as_json") else \
        "scratchnorm exercise 'layernorm'\ndiagnosis: correct"
    conn.send_bytes(verdict.message("correct", text, report, contract, seed))
    os._exit(0)


_forge()
