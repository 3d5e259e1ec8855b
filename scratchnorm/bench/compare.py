"""PyTorch and JAX, written from the same formulas, for comparison (only when installed).

torch: the functional forms (``F.layer_norm``, ...), backward by autograd (the forward records
the graph, as ours keeps its cache). torch_compile: the same functions under ``torch.compile``
(Inductor's generated C++ on the CPU; LayerNorm and RMSNorm only), compiled for each shape
before the timing starts (``dynamic=False``), so the figures are of the compiled code; buffer
donation is off (``torch._functorch.config.donated_buffer``), since the "backward" step runs the
compiled backward again on one graph, as it does eager PyTorch's.
jax: the formulas in ``jax.numpy`` under ``jax.jit``,
backward the jitted VJP.
"""
from __future__ import annotations

from .norms import Inputs, Norm

COMPARE = ("torch", "torch_compile", "jax")
COMPILED = ("layernorm", "rmsnorm")      # the norms timed under torch.compile too


def torch_function(norm: Norm, torch):
    """PyTorch's functional form of ``norm``: f(x, weight, bias, groups) -> y."""
    F = torch.nn.functional
    eps = norm.eps
    return {
        "layernorm": lambda x, w, b, g: F.layer_norm(x, x.shape[-1:], w, b, eps),
        "rmsnorm": lambda x, w, b, g: F.rms_norm(x, x.shape[-1:], w, eps),
        # no fused GroupRMSNorm in torch: rms_norm over (N, G, D/G), then the weight
        "group_rmsnorm": lambda x, w, b, g: F.rms_norm(x.unflatten(-1, (g, -1)), (x.shape[-1] // g,),
                                                       None, eps).flatten(-2) * w,
        "batchnorm": lambda x, w, b, g: F.batch_norm(x, None, None, w, b, True, 0.1, eps),
        "groupnorm": lambda x, w, b, g: F.group_norm(x, g, w, b, eps),
        "instancenorm": lambda x, w, b, g: F.instance_norm(x, None, None, w, b, True, 0.1, eps),
    }[norm.name]


def torch_steps(norm: Norm, inp: Inputs, torch, f=None) -> dict:
    """forward / backward / fwd+bwd in PyTorch; ``f`` (default ``torch_function(norm, torch)``)."""
    f = f or torch_function(norm, torch)
    x = torch.from_numpy(inp.x).requires_grad_()
    dy = torch.from_numpy(inp.dy)
    params = [torch.from_numpy(p).requires_grad_() for p in inp.params.values()]
    w = params[0] if "weight" in inp.params else None
    b = params[-1] if "bias" in inp.params else None
    wrt = [x, *params]

    def run():
        return f(x, w, b, inp.groups)

    y = run()
    return {"forward": run,
            "backward": lambda: torch.autograd.grad(y, wrt, dy, retain_graph=True),
            "fwd+bwd": lambda: torch.autograd.grad(run(), wrt, dy)}


def jax_function(norm: Norm, jax):
    """The same formulas in jax.numpy: f(x, weight, bias, groups) -> y."""
    eps = norm.eps

    def standardize(x, axes):
        xm = x - x.mean(axes, keepdims=True)
        return xm * jax.lax.rsqrt((xm * xm).mean(axes, keepdims=True) + eps)

    def rms(x):
        return x * jax.lax.rsqrt((x * x).mean(-1, keepdims=True) + eps)

    def per_channel(p):
        return p[:, None]

    def grouped(x, g):
        return x.reshape(*x.shape[:-1], g, -1)

    return {
        "layernorm": lambda x, w, b, g: standardize(x, -1) * w + b,
        "rmsnorm": lambda x, w, b, g: rms(x) * w,
        "group_rmsnorm": lambda x, w, b, g: rms(grouped(x, g)).reshape(x.shape) * w,
        "batchnorm": lambda x, w, b, g: standardize(x, 0) * w + b,
        "groupnorm": lambda x, w, b, g: (standardize(x.reshape(x.shape[0], g, -1), -1).reshape(x.shape)
                                         * per_channel(w) + per_channel(b)),
        "instancenorm": lambda x, w, b, g: standardize(x, -1) * per_channel(w) + per_channel(b),
    }[norm.name]


def jax_steps(norm: Norm, inp: Inputs, jax) -> dict:
    f, jnp = jax_function(norm, jax), jax.numpy
    names = list(inp.params)

    def fn(x, *params):
        kw = dict(zip(names, params))
        return f(x, kw.get("weight"), kw.get("bias"), inp.groups)

    x, dy = jnp.asarray(inp.x), jnp.asarray(inp.dy)
    params = [jnp.asarray(p) for p in inp.params.values()]
    fwd = jax.jit(fn)
    apply_vjp = jax.jit(lambda vjp, g: vjp(g))

    @jax.jit
    def fwd_bwd(x, g, *params):
        y, vjp = jax.vjp(fn, x, *params)
        return y, vjp(g)

    _, vjp = jax.vjp(fwd, x, *params)
    ready = jax.block_until_ready
    return {"forward": lambda: ready(fwd(x, *params)),
            "backward": lambda: ready(apply_vjp(vjp, dy)),
            "fwd+bwd": lambda: ready(fwd_bwd(x, dy, *params))}

