#!/usr/bin/env python3
"""Writes tests/data/torch_optim.safetensors: what torch.optim does, for tests/test_optim_torch.cpp.

Run with a Python that has torch (made with torch 2.11.0, CPU):
    python3 scripts/torch_optim_fixtures.py    # or name another output file

Optimisers: two parameter groups (a (2, 3) weight with lr 0.01 and weight decay 0.1, a (3,)
bias with lr 0.05 and none), four steps with non-uniform gradients; the bias has no gradient at
step 3 (skipped). Schedulers: the rates of both groups (base 0.1 and 0.02) after construction
and every step. Every value is stored as float64 (an f32 run's values widened), so the test
compares exact bits. The tensors, each (steps, values) unless said:
    w0 (2, 3), b0 (3,)               the parameters before the first step
    grad_w (4, 6), grad_b (4, 3)     the gradients per step; grad_b_given (4,) int32: 0 where the
                                     bias has none (its grad_b row is zeros)
    NAME_f64, NAME_f32               per optimiser NAME (OPTIMISERS) and dtype: the weight, then
                                     the bias, after every step
    sequential_warmup_cosine, sequential_three
                                     per scheduler: both groups' rates
    plateau_NAME_metrics (M,), plateau_NAME
                                     per ReduceLROnPlateau case NAME (PLATEAUS): the metrics, and
                                     per step both groups' rates, num_bad_epochs, cooldown_counter
The metadata holds torch's version.
"""
import json
import math
import os
import struct
import sys

import torch

torch.set_default_dtype(torch.float64)

W0 = [[0.5, -1.25, 2.0], [0.0, 0.75, -0.3]]
B0 = [0.1, -0.2, 0.05]


def grads(step):
    """Non-uniform gradients, different at every step (None: no gradient)."""
    w = [[math.sin(1.3 * (3 * r + c) + 0.7 * step) * (1 + 0.5 * c) for c in range(3)] for r in range(2)]
    b = None if step == 2 else [math.cos(0.9 * k - 0.4 * step) * 0.3 for k in range(3)]
    return w, b


def flat(t):
    return [float(x) for x in t.detach().reshape(-1).tolist()]


OPTIMISERS = [
    ("adam", "torch.optim.Adam", dict(betas=(0.8, 0.95), eps=1e-3)),
    ("adamw", "torch.optim.AdamW", dict(betas=(0.8, 0.95), eps=1e-3)),
    ("sgd_momentum", "torch.optim.SGD", dict(momentum=0.9)),
    ("rmsprop", "torch.optim.RMSprop", dict(alpha=0.9, eps=1e-3)),
    ("rmsprop_momentum", "torch.optim.RMSprop", dict(alpha=0.9, eps=1e-3, momentum=0.8)),
    ("rmsprop_centered", "torch.optim.RMSprop", dict(alpha=0.9, eps=1e-3, centered=True)),
    # alpha 0.3: lerp's weight 1 - alpha = 0.7 takes torch.lerp's other form.
    ("rmsprop_centered_momentum", "torch.optim.RMSprop", dict(alpha=0.3, eps=1e-3, centered=True, momentum=0.5)),
]


def run_optimiser(make, kwargs, dtype):
    w = torch.tensor(W0, dtype=dtype, requires_grad=True)
    b = torch.tensor(B0, dtype=dtype, requires_grad=True)
    opt = eval(make)([{"params": [w], "lr": 0.01, "weight_decay": 0.1},
                      {"params": [b], "lr": 0.05, "weight_decay": 0.0}], **kwargs)
    out = []
    for step in range(4):
        gw, gb = grads(step)
        w.grad = torch.tensor(gw, dtype=dtype)
        b.grad = None if gb is None else torch.tensor(gb, dtype=dtype)
        opt.step()
        out.append(flat(w) + flat(b))
    return out


def lrs(opt):
    return [g["lr"] for g in opt.param_groups]


def scheduler_sequences():
    def fresh():
        w = torch.zeros(1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        return torch.optim.SGD([{"params": [w], "lr": 0.1}, {"params": [b], "lr": 0.02}])

    def rates(opt, schedule, steps):
        seq = [lrs(opt)]
        for _ in range(steps):
            opt.step()
            schedule.step()
            seq.append(lrs(opt))
        return seq

    sched = torch.optim.lr_scheduler
    seqs = {}
    opt = fresh()
    lin = sched.LinearLR(opt, start_factor=0.1, end_factor=1.0, total_iters=5)
    cos = sched.CosineAnnealingLR(opt, T_max=10, eta_min=0.001)
    seqs["sequential_warmup_cosine"] = rates(opt, sched.SequentialLR(opt, [lin, cos], milestones=[5]), 20)

    opt = fresh()
    lin = sched.LinearLR(opt, start_factor=0.5, end_factor=1.0, total_iters=3)
    step_lr = sched.StepLR(opt, step_size=2, gamma=0.5)
    cos = sched.CosineAnnealingLR(opt, T_max=4)
    seqs["sequential_three"] = rates(opt, sched.SequentialLR(opt, [lin, step_lr, cos], milestones=[3, 8]), 14)
    return seqs


# ReduceLROnPlateau: metric sequences built to hit the boundaries (binary fractions, so
# best * (1 - threshold) and best - threshold are exact): ties with the best, improvements by
# exactly the threshold (not better), cooldown, and min_lr.
PLATEAUS = [
    ("min_rel", dict(mode="min", factor=0.5, patience=1, threshold=0.25, threshold_mode="rel", cooldown=0),
     [2.0, 1.5, 1.5, 1.125, 1.0, 1.0, 0.5, 0.5, 0.5, 0.5]),
    ("min_abs_cooldown", dict(mode="min", factor=0.5, patience=0, threshold=0.5, threshold_mode="abs", cooldown=2),
     [4.0, 3.5, 3.5, 3.0, 2.0, 2.0, 2.0, 2.0, 1.25, 1.25, 1.25]),
    ("max_rel_min_lr", dict(mode="max", factor=0.1, patience=2, threshold=0.5, threshold_mode="rel", cooldown=1,
                            min_lr=0.005),
     [1.0, 1.5, 1.5, 1.5, 2.25, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5, 3.5]),
    ("max_abs", dict(mode="max", factor=0.5, patience=1, threshold=0.25, threshold_mode="abs", cooldown=0),
     [1.0, 1.25, 1.5, 1.5, 1.75, 1.75, 1.75, 2.5, 2.5, 2.5]),
]


def plateau_sequences():
    out = []
    for name, kwargs, metrics in PLATEAUS:
        w = torch.zeros(1, requires_grad=True)
        b = torch.zeros(1, requires_grad=True)
        opt = torch.optim.SGD([{"params": [w], "lr": 0.1}, {"params": [b], "lr": 0.02}])
        s = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        seq = []
        for m in metrics:
            s.step(m)
            seq.append(lrs(opt) + [s.num_bad_epochs, s.cooldown_counter])
        out.append((name, kwargs, metrics, seq))
    return out


def save_safetensors(path, tensors, metadata):
    """tensors: name -> (dtype "F64" or "I32", shape, flat values), written in name order."""
    header, data = {"__metadata__": metadata}, b""
    for name in sorted(tensors):
        dtype, shape, values = tensors[name]
        raw = struct.pack("<%d%s" % (len(values), "d" if dtype == "F64" else "i"), *values)
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def rows(name, seq):
    return name, ("F64", (len(seq), len(seq[0])), [float(v) for row in seq for v in row])


def main():
    default = os.path.join(os.path.dirname(__file__), "..", "tests", "data", "torch_optim.safetensors")
    path = sys.argv[1] if len(sys.argv) > 1 else default
    steps = [grads(step) for step in range(4)]
    tensors = dict([rows("w0", W0), ("b0", ("F64", (3,), B0)),
                    rows("grad_w", [sum(gw, []) for gw, _ in steps]),
                    rows("grad_b", [gb or [0.0] * 3 for _, gb in steps]),
                    ("grad_b_given", ("I32", (4,), [int(gb is not None) for _, gb in steps]))])
    for name, make, kwargs in OPTIMISERS:
        for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
            tensors.update([rows("%s_%s" % (name, suffix), run_optimiser(make, kwargs, dtype))])
    for name, seq in scheduler_sequences().items():
        tensors.update([rows(name, seq)])
    for name, _, metrics, seq in plateau_sequences():
        tensors["plateau_%s_metrics" % name] = ("F64", (len(metrics),), [float(m) for m in metrics])
        tensors.update([rows("plateau_" + name, seq)])
    save_safetensors(path, tensors, {"torch": torch.__version__})


if __name__ == "__main__":
    main()
