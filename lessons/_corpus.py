"""English text that ships with Python: the standard library's documentation strings, as characters.

The training lessons (11, 12) need real text without a download. Every
Python installation carries some: the docstrings of its standard library.
``stdlib_docs()`` imports a fixed list of modules and collects
``inspect.getdoc`` of each module and of its public classes, functions and
methods, sorted by qualified name, each text once. The corpus is therefore
the same on every run of one Python version (the lesson prints its size; a
different version has slightly different docstrings).

``char_data()`` turns it into token ids: one id per character, printable
ASCII and newline (others are dropped), with every tenth document held out
for validation, so both parts come from every module. Baselines a model
must beat, measured on the validation part with counts from the training
part (add-one smoothing, so no probability is 0):

    unigram  L1 = -mean log p(c)            one fixed distribution for every position
    bigram   L2 = -mean log p(c | previous)
"""
from __future__ import annotations

import importlib
import inspect
import string
from dataclasses import dataclass

import numpy as np

MODULES = ("argparse", "bisect", "calendar", "collections", "csv", "dataclasses", "datetime", "decimal",
           "difflib", "enum", "fractions", "functools", "heapq", "inspect", "itertools", "json", "logging",
           "pathlib", "pprint", "random", "re", "shutil", "statistics", "string", "textwrap", "typing",
           "unittest", "urllib.parse", "zipfile")
ALPHABET = "\n" + "".join(c for c in string.printable if c.isprintable())   # newline + 95 printable ASCII
HOLD_OUT_EVERY = 10


def _public(namespace: dict, module: str):
    """(name, object) of the public classes and functions defined in ``module``."""
    for name, obj in namespace.items():
        if not name.startswith("_") and (inspect.isclass(obj) or inspect.isfunction(obj)) \
                and getattr(obj, "__module__", None) == module:
            yield name, obj


def stdlib_docs(modules=MODULES) -> list[str]:
    """The docstrings of ``modules`` and of their public classes, functions and methods.

    Sorted by qualified name; a text that occurs twice (an inherited docstring) is kept once.
    """
    docs = {}
    for module_name in modules:
        module = importlib.import_module(module_name)
        docs[module_name] = inspect.getdoc(module)
        for name, obj in _public(vars(module), module_name):
            docs[f"{module_name}.{name}"] = inspect.getdoc(obj)
            if inspect.isclass(obj):
                for method, fn in _public(vars(obj), module_name):
                    docs[f"{module_name}.{name}.{method}"] = inspect.getdoc(fn)
    seen, texts = set(), []
    for key in sorted(docs):
        text = docs[key]
        if text and text not in seen:
            seen.add(text)
            texts.append(text)
    return texts


@dataclass
class CharData:
    """Character ids of the training and validation text, and the alphabet they index."""

    alphabet: str
    train: np.ndarray          # (n_train,) int64
    val: np.ndarray            # (n_val,) int64
    n_docs: int

    @property
    def vocab_size(self) -> int:
        return len(self.alphabet)

    def encode(self, text: str) -> np.ndarray:
        return encode(text, self.alphabet)

    def decode(self, ids) -> str:
        return "".join(self.alphabet[i] for i in ids)

    def unigram_loss(self) -> float:
        counts = np.bincount(self.train, minlength=self.vocab_size) + 1.0
        return float(-np.mean(np.log(counts / counts.sum())[self.val]))

    def bigram_loss(self) -> float:
        counts = np.ones((self.vocab_size, self.vocab_size))
        np.add.at(counts, (self.train[:-1], self.train[1:]), 1.0)
        logp = np.log(counts / counts.sum(axis=1, keepdims=True))
        return float(-np.mean(logp[self.val[:-1], self.val[1:]]))

    def windows(self, part: str, n: int, length: int, rng) -> np.ndarray:
        """``n`` random windows of ``length`` consecutive ids from the "train" or "val" part: (n, length)."""
        ids = self.train if part == "train" else self.val
        starts = rng.integers(0, len(ids) - length, size=n)
        return ids[starts[:, None] + np.arange(length)]


def encode(text: str, alphabet: str = ALPHABET) -> np.ndarray:
    """The ids of the characters of ``text`` that are in ``alphabet`` (the others are dropped)."""
    index = {c: i for i, c in enumerate(alphabet)}
    return np.array([index[c] for c in text if c in index], dtype=np.int64)


def char_data(modules=MODULES) -> CharData:
    """``stdlib_docs(modules)`` as character ids, every HOLD_OUT_EVERY-th document held out for validation."""
    docs = stdlib_docs(modules)
    held = [i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1 for i in range(len(docs))]
    train = "\n\n".join(d for d, h in zip(docs, held) if not h)
    val = "\n\n".join(d for d, h in zip(docs, held) if h)
    return CharData(ALPHABET, encode(train), encode(val), len(docs))
