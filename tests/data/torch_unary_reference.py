"""PyTorch's values of the pointwise ops of framework/ops/unary.h at their edges.

Prints the rows of kTorchUnaryReference (tests/test_ops_elementwise.cpp): for each case the
input x, a non-uniform upstream gradient g, and torch's output and d x, all in float64.

    ~/.cache/gat/torch-venv/bin/python tests/data/torch_unary_reference.py   # torch 2.11 (CPU)

then paste the output over the table's rows and run clang-format on the file.
"""

import math

import torch
import torch.nn.functional as F

NAN, INF = math.nan, math.inf
UPSTREAM = [0.5, -1.5, 2.0, 0.25, 3.0, -0.75, 1.25, -2.0, 0.125, 1.75, -0.5, 2.5]

# (name, C++ call on a tensor x, torch's function, x, g or None for UPSTREAM's first len(x))
CASES = [
    ("relu6 at 0 and 6", "ops::relu6(x)", F.relu6, [-1.0, -0.0, 0.0, 0.5, 6.0, 7.0, NAN], None),
    ("gelu", "ops::gelu(x)", F.gelu, [-40.0, -5.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.0, 40.0, NAN], None),
    (
        "gelu tanh",
        "ops::gelu(x, ops::GeluApproximate::tanh)",
        lambda x: F.gelu(x, approximate="tanh"),
        [-40.0, -5.0, -1.0, -1e-3, 0.0, 1e-3, 0.5, 1.0, 3.0, 40.0, NAN],
        None,
    ),
    ("silu", "ops::silu(x)", F.silu, [-800.0, -40.0, -1.0, 0.0, 1.0, 40.0, 800.0, NAN], None),
    (
        "softplus around threshold 20",
        "ops::softplus(x)",
        F.softplus,
        [-40.0, 0.0, 19.9, 20.0, 20.1, 40.0, NAN],
        None,
    ),
    (
        "softplus beta 2 threshold 3",
        "ops::softplus(x, 2.0, 3.0)",
        lambda x: F.softplus(x, 2.0, 3.0),
        [-40.0, 1.4999, 1.5, 1.5001, 40.0],
        None,
    ),
    (
        "softplus beta -0.5 threshold 5",
        "ops::softplus(x, -0.5, 5.0)",
        lambda x: F.softplus(x, -0.5, 5.0),
        [-10.1, -10.0, -9.9, 3.0],
        None,
    ),
    ("sqrt at 0", "ops::sqrt(x)", torch.sqrt, [0.0, 0.0, 0.0, 0.25, 4.0, -1.0], [1.0, -1.0, 0.0, 2.0, 1.0, 1.0]),
    ("pow 0.5", "ops::pow(x, 0.5)", lambda x: torch.pow(x, 0.5), [0.0, 0.25, 4.0, -1.0], None),
    ("pow 2.5", "ops::pow(x, 2.5)", lambda x: torch.pow(x, 2.5), [0.0, 2.0, -1.0], None),
    ("pow 3", "ops::pow(x, 3.0)", lambda x: torch.pow(x, 3.0), [-2.0, 0.0, 1.5], None),
    ("pow -1", "ops::pow(x, -1.0)", lambda x: torch.pow(x, -1.0), [0.0, -2.0, 0.5], None),
    ("pow 0", "ops::pow(x, 0.0)", lambda x: torch.pow(x, 0.0), [0.0, -1.0, NAN], None),
    (
        "clamp at the bounds",
        "ops::clamp(x, -1.0, 2.0)",
        lambda x: torch.clamp(x, -1.0, 2.0),
        [-2.0, -1.0, 0.0, 2.0, 3.0, NAN],
        None,
    ),
    (
        "clamp min only",
        "ops::clamp(x, -1.0, std::nullopt)",
        lambda x: torch.clamp(x, min=-1.0),
        [-INF, -2.0, -1.0, 0.0, INF],
        None,
    ),
    (
        "clamp max only",
        "ops::clamp(x, std::nullopt, 2.0)",
        lambda x: torch.clamp(x, max=2.0),
        [-INF, 1.0, 2.0, 3.0, INF],
        None,
    ),
    ("clamp min > max", "ops::clamp(x, 2.0, 1.0)", lambda x: torch.clamp(x, 2.0, 1.0), [0.0, 1.5, 3.0], None),
]


def literal(v):
    if math.isnan(v):
        return "NAN"
    if math.isinf(v):
        return "INFINITY" if v > 0 else "-INFINITY"
    return repr(v)


def row(values):
    return "{" + ", ".join(literal(v) for v in values) + "}"


def main():
    print(f"// torch {torch.__version__}")
    for name, call, fn, xs, gs in CASES:
        gs = gs if gs is not None else UPSTREAM[: len(xs)]
        x = torch.tensor(xs, dtype=torch.float64, requires_grad=True)
        out = fn(x)
        out.backward(torch.tensor(gs, dtype=torch.float64))
        print(f'{{"{name}", [](const Tensor& x) {{ return {call}; }},')
        print(f"  {row(xs)}, {row(gs)},")
        print(f"  {row(out.detach().tolist())}, {row(x.grad.tolist())}}},")


if __name__ == "__main__":
    main()
