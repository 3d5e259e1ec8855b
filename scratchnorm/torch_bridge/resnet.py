r"""Example: a learner's spatial BatchNorm inside a tiny Hugging Face ResNet, trained through their backward,
then evaluated with the running averages their forward kept.

    python -m scratchnorm.torch_bridge.resnet layers.py     # CS231n's spatial_batchnorm_forward / _backward

A two-stage ResNet is built from a config (random weights, nothing downloaded, float64). A copy of it gets
the learner's spatial BatchNorm in place of each of its six torch.nn.BatchNorm2d (``CacheNorm``, the cache
contract: module docstring of scratchnorm.torch_bridge, which says how bn_param's momentum and running
variance are translated to torch's). Both models classify the same images, scikit-learn's handwritten
digits (8 x 8, upsampled to 16 x 16, so that the last stage still has 2 x 2 positions per channel), and
side_by_side.py compares them case by case:

* in training mode, one forward and backward: the logits (per image) and every parameter's gradient;
* ``--steps`` of SGD: each step's loss, then every parameter, running mean and running variance (per
  channel) after the last;
* in eval mode, the logits of other digits, which the running averages normalize.

When a tensor is off, the exercise checker runs on the learner's file and names the mistake. The exit code
is 0 when everything agrees.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np
import torch

from . import side_by_side
from .side_by_side import TOLERANCE, compare, jitter_affine, one_step, report, train

CONFIG = dict(num_channels=1, embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1], layer_type="basic",
              num_labels=10)
# the worst case's e (side_by_side.py) a right CS231n learner measured here, float64: 3e-15 (logits), 4e-13
# (the gradients), after 5 steps of SGD 2e-15 (losses), 4e-14 (parameters), 3e-14 (running averages),
# 3e-15 (the logits in eval mode); gamma left out of dx moves the gradients by 1e-1. (TOLERANCE: side_by_side.py)
LR = 0.1


def is_batchnorm(module) -> bool:
    return isinstance(module, torch.nn.BatchNorm2d)


def tiny_resnet(seed: int = 0):
    """A ResNet from CONFIG with random weights (float64), in training mode; the BatchNorms' weights drawn
    around 1 and their biases around 0 (their init, exactly 1 and 0, would hide a dgamma or a gamma left out)."""
    from transformers import ResNetConfig, ResNetForImageClassification     # the compare extra
    torch.manual_seed(seed)
    model = ResNetForImageClassification(ResNetConfig(**CONFIG)).double().train()
    jitter_affine(model, is_batchnorm)
    return model


def with_learners_norms(model, source, exercise: str = "spatial_batchnorm"):
    """A copy of ``model`` whose BatchNorm2d are the learner's (``source``: their file, module or dict), with
    the same weights, eps, momentum and running averages. Returns (the copy, the names replaced, the
    learner's contract)."""
    return side_by_side.with_learners_norms(model, source, exercise, is_batchnorm)


def digits(seed: int = 1, batch: int = 32) -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` of scikit-learn's digits drawn with ``seed``: (images (batch, 1, 16, 16) in [0, 1], labels)."""
    from sklearn.datasets import load_digits
    data = load_digits()
    pick = np.random.default_rng(seed).choice(len(data.target), batch, replace=False)
    images = np.kron(data.images[pick] / 16.0, np.ones((2, 2)))                 # (batch, 16, 16)
    return torch.from_numpy(images[:, None]), torch.from_numpy(data.target[pick])


def runner(images, labels):
    """run(model) -> (the cross-entropy on the batch, the logits (batch, classes))."""
    def run(model):
        out = model(pixel_values=images, labels=labels)
        return out.loss, out.logits
    return run


def evaluated(model, bridged, images) -> list:
    """Both in eval mode, the learner's forward given mode "test": the logits on ``images``, compared."""
    with torch.no_grad():
        logits = [m.eval()(pixel_values=images).logits for m in (model, bridged)]
    for m in (model, bridged):
        m.train()
    return [compare("output", "logits in eval mode", logits[1], logits[0])]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m scratchnorm.torch_bridge.resnet",
                                 description="A learner's spatial BatchNorm inside a tiny Hugging Face ResNet.")
    ap.add_argument("file", metavar="FILE", help="the learner's file: spatial_batchnorm_forward and "
                    "spatial_batchnorm_backward (CS231n's)")
    ap.add_argument("--steps", type=int, default=5, help="SGD steps side by side (default 5)")
    args = ap.parse_args(argv)
    model = tiny_resnet()
    bridged, names, contract = with_learners_norms(model, args.file)
    run = runner(*digits())
    print(f"tiny ResNet (stages of {CONFIG['hidden_sizes']} channels), float64: {len(names)} BatchNorm2d are "
          f"the learner's, in {contract.text()}")
    comparisons = one_step(model, bridged, run)
    losses, trained = train(model, bridged, run, args.steps, LR)
    comparisons += trained + evaluated(model, bridged, digits(seed=2)[0])
    return report(comparisons, losses, TOLERANCE, contract, args.file, "spatial BatchNorm trains the ResNet")


if __name__ == "__main__":
    sys.exit(main())
