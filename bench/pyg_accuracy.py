#!/usr/bin/env python3
"""PyG's GAT or GATv2 on the GPU, 10 seeds: the accuracy reference for gat_train's --runs 10.

The model, recipe and early stop are bench/cpu_runs.py's (`train_one`: compare_pyg.pyg_gat, Adam
lr 0.005, weight decay 5e-4, NormalizeFeatures, stop after 100 epochs without a better validation
accuracy or loss), with the data and the parameters on the GPU. Run from the repository root on a
machine with a CUDA GPU, PyTorch and torch_geometric (scipy for the Planetoid reader):

    python3 bench/pyg_accuracy.py --model gatv2 --data-dir DIR

and beside it `BUILD/gat_train --dataset cora --model gatv2 --device cuda --runs 10 --json`.
"""
import argparse
import json
import os
import statistics
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_pyg  # noqa: E402
import cpu_runs  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="gat", choices=["gat", "gatv2"])
    ap.add_argument("--datasets", default="cora,citeseer")
    ap.add_argument("--data-dir", default=os.environ.get("GAT_DATA_DIR"), required="GAT_DATA_DIR" not in os.environ,
                    help="the Planetoid raw files (default: $GAT_DATA_DIR)")
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--first-seed", type=int, default=0,
                    help="seeds first-seed .. first-seed+seeds-1 (to split many seeds over processes)")
    ap.add_argument("--json", action="store_true", help="also print each run's accuracy as a JSON line")
    args = ap.parse_args()
    build = compare_pyg.pyg_gat  # train_one builds its model with it: on the data's device here
    compare_pyg.pyg_gat = lambda data, model="gat": build(data, model).to(data.x.device)
    for name in args.datasets.split(","):
        data = compare_pyg.pyg_planetoid(name, args.data_dir, torch.device("cuda"))
        seeds = range(args.first_seed, args.first_seed + args.seeds)
        runs = []
        for seed in seeds:  # with --json, a line per run (a run cut short keeps the ones before)
            runs.append(cpu_runs.train_one(data, seed, 1_000_000, args.model))
            if args.json:
                print(json.dumps({"model": args.model, "dataset": name, "seed": seed,
                                  "test_acc": 100 * runs[-1]["test_acc"], "epochs": runs[-1]["epochs"]}), flush=True)
        acc = [100 * r["test_acc"] for r in runs]
        spread = f" +- {statistics.stdev(acc):.2f}" if len(acc) > 1 else ""
        print(f"PyG {args.model} {name}: test accuracy {statistics.mean(acc):.2f}{spread} % over {len(runs)} "
              f"seeds from {args.first_seed} (epochs {[r['epochs'] for r in runs]})", flush=True)

    return 0


if __name__ == "__main__":
    sys.exit(main())
