#!/usr/bin/env python3
"""Writes tests/torch_optim_fixtures.h: what torch.optim does, for tests/test_optim_torch.cpp.

Run with a Python that has torch (made with torch 2.11.0, CPU), then format the header:
    python3 scripts/torch_optim_fixtures.py > tests/torch_optim_fixtures.h
    clang-format -i tests/torch_optim_fixtures.h

Optimisers: two parameter groups (a (2, 3) weight with lr 0.01 and weight decay 0.1, a (3,)
bias with lr 0.05 and none), four steps with non-uniform gradients; the bias has no gradient at
step 3 (skipped). Every value is written as a C hex float, so the test compares exact bits.
Schedulers: the rates of both groups (base 0.1 and 0.02) after construction and every step.
"""
import math
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


def hexs(values):
    return ", ".join(float(v).hex() for v in values)


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


def main():
    w = sys.stdout.write
    w("// Generated by scripts/torch_optim_fixtures.py with torch %s (CPU); do not edit.\n" % torch.__version__)
    w("// What torch.optim gives for the runs that the script describes, as exact hex floats.\n")
    w("#pragma once\n\n#include <vector>\n\nnamespace torch_fixtures {\n\n")
    w("inline const std::vector<double> kW0{%s};\n" % hexs(sum(W0, [])))
    w("inline const std::vector<double> kB0{%s};\n" % hexs(B0))
    w("// Per step: the weight's gradient (6), the bias's (3, empty: no gradient).\n")
    w("inline const std::vector<std::vector<double>> kGradW{\n")
    for step in range(4):
        w("    {%s},\n" % hexs(sum(grads(step)[0], [])))
    w("};\ninline const std::vector<std::vector<double>> kGradB{\n")
    for step in range(4):
        gb = grads(step)[1]
        w("    {%s},\n" % ("" if gb is None else hexs(gb)))
    w("};\n\n// Per optimiser and dtype: the weight then the bias after every step.\n")
    for name, make, kwargs in OPTIMISERS:
        for dtype, suffix in ((torch.float64, "f64"), (torch.float32, "f32")):
            w("// %s(groups, %s), %s\n" % (make, ", ".join("%s=%r" % kv for kv in kwargs.items()), suffix))
            w("inline const std::vector<std::vector<double>> k_%s_%s{\n" % (name, suffix))
            for row in run_optimiser(make, kwargs, dtype):
                w("    {%s},\n" % hexs(row))
            w("};\n")
    w("\n// Per scheduler: both groups' rates after construction, then after every step().\n")
    for name, seq in scheduler_sequences().items():
        w("inline const std::vector<std::vector<double>> k_%s{\n" % name)
        for row in seq:
            w("    {%s},\n" % hexs(row))
        w("};\n")
    w("\n// ReduceLROnPlateau: per step, both groups' rates, num_bad_epochs and cooldown_counter.\n")
    for name, kwargs, metrics, seq in plateau_sequences():
        w("// %s\n" % ", ".join("%s=%r" % kv for kv in kwargs.items()))
        w("inline const std::vector<double> k_plateau_%s_metrics{%s};\n" % (name, hexs(metrics)))
        w("inline const std::vector<std::vector<double>> k_plateau_%s{\n" % name)
        for row in seq:
            w("    {%s},\n" % hexs(row))
        w("};\n")
    w("\n}  // namespace torch_fixtures\n")


if __name__ == "__main__":
    main()
