"""The stub a student starts from: ``python -m scratchnorm.exercises new NAME [DIR]`` writes it."""
from __future__ import annotations

import textwrap

from .catalogue import EXERCISES

SIGNATURE_DOC = {
    "forward": "Return y, the same shape as x.",
    "backward": "Return a dict of gradients: {keys}, each the shape of what it differentiates.",
}


def _comment(text: str, width: int = 100) -> str:
    lines = []
    for para in text.splitlines():
        lines += textwrap.wrap(para, width - 2, break_on_hyphens=False) or [""]
    return "\n".join(f"# {ln}".rstrip() for ln in lines)


def stub_text(name: str) -> str:
    """The text of NAME.py: the forward, what to derive, a folded hint, the functions to fill in, questions."""
    ex = EXERCISES[name]
    keys = ", ".join(repr(g) for g in ex.grads)
    functions = []
    for fname, params in ex.functions.items():
        doc = SIGNATURE_DOC[fname].format(keys=keys)
        functions.append(f'def {fname}({", ".join(params)}):\n    """{doc}"""\n'
                         f'    raise NotImplementedError("{fname}: not written yet")\n')
    questions = "\n".join(f"#   - {q}" for q, _ in ex.questions)
    return f'''"""Exercise: {ex.title}.

Forward, for each normalized group of x (float64 arrays):

{textwrap.indent(ex.forward_text, "    ")}

Derive: {textwrap.fill(ex.derive_text, 96, subsequent_indent="")}

Write the function(s) below with NumPy, then check them:

    python -m scratchnorm.exercises check {name}.py

The check runs them on random inputs, compares with scratchnorm's own answer, and, when something is
wrong, says which term of the derivation went wrong. No cache: the backward gets the forward's inputs and
recomputes what it needs.
"""
import numpy as np

EXERCISE = "{name}"

# region Hint (unfold it only if you are stuck)
{_comment(ex.hint)}
# endregion


{(chr(10) * 2).join(functions).rstrip()}


# Questions for when the check passes (it then shows the answers):
{questions}
'''
