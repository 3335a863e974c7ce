#!/usr/bin/env python3
"""The Cora epoch of examples/pyg_gat_cora.py with three layers, in one process on one GPU.

The epoch is that script's: a training step (dropout, two GAT layers, ELU, cross-entropy on the
training mask, backward, Adam) and an evaluation (a forward pass, then the accuracy on three
masks). It is timed with three layers in its place, in turns (A B C A B C ...):

  pyg        torch_geometric.nn.GATConv
  gat_torch  gat_torch.GATConv
  floor      a stand-in that only projects (x W, then the bias): no scores, no softmax, no
             aggregation. No GATConv can make the epoch faster than this one, so pyg / floor
             bounds the speed-up any layer can give inside this script.

Prints the median epoch (and its spread over --rounds), the ratios pyg / gat_torch and
pyg / floor, and the share of gat_torch's epoch that is the script's own cost (floor / gat_torch).
Needs torch, torch_geometric, gat_torch (PYTHONPATH=<build>/python) and the raw Planetoid files:

    python3 bench/cora_epoch.py --raw-dir DIR [--root /tmp/planetoid] [--device cuda]
"""
import argparse
import json
import os.path as osp
import statistics
import sys
import time

import torch
import torch_geometric.nn as pyg
import torch_geometric.transforms as T
from torch_geometric.datasets import Planetoid

import gat_torch

sys.path.insert(0, osp.join(osp.dirname(osp.realpath(__file__)), '..', 'examples'))
import pyg_gat_cora as example  # noqa: E402  (its model, training step and evaluation)


class ProjectOnly(torch.nn.Module):
    """GATConv's projection and bias alone: the work every GATConv does before attention."""

    def __init__(self, in_channels, out_channels, heads=1, concat=True, dropout=0.0):
        super().__init__()
        del dropout
        self.heads, self.out_channels, self.concat = heads, out_channels, concat
        self.lin = torch.nn.Linear(in_channels, heads * out_channels, bias=False)
        self.bias = torch.nn.Parameter(torch.zeros(heads * out_channels if concat
                                                   else out_channels))

    def forward(self, x, edge_index):
        del edge_index
        out = self.lin(x)
        if not self.concat:
            out = out.view(-1, self.heads, self.out_channels).mean(dim=1)
        return out + self.bias


def make_epoch(model, data):
    """One epoch of the example: its training step, then its evaluation's three accuracies."""
    optimizer = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)

    def epoch():
        example.train(model, optimizer, data)
        example.test(model, data)
    return epoch


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--raw-dir', required=True, help='folder with ind.cora.* files')
    parser.add_argument('--root', default='/tmp/planetoid', help='Planetoid root')
    parser.add_argument('--device', default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--epochs', type=int, default=50, help='epochs per round')
    parser.add_argument('--rounds', type=int, default=5, help='rounds of A B C turns')
    args = parser.parse_args()
    if args.epochs < 1 or args.rounds < 1:
        parser.error('--epochs and --rounds must be at least 1')

    try:
        example.link_raw_files(args.raw_dir, args.root, 'Cora')
    except FileNotFoundError as error:
        raise SystemExit(str(error))
    device = torch.device(args.device)
    dataset = Planetoid(args.root, 'Cora', transform=T.NormalizeFeatures())
    data = dataset[0].to(device)

    def sync():
        if device.type == 'cuda':
            torch.cuda.synchronize(device)

    layers = {'pyg': pyg.GATConv, 'gat_torch': gat_torch.GATConv, 'floor': ProjectOnly}
    epochs = {}
    for name, conv in layers.items():
        torch.manual_seed(0)
        model = example.GAT(dataset.num_features, 8, dataset.num_classes, 8, conv).to(device)
        epochs[name] = make_epoch(model, data)
        for _ in range(5):  # warm-up: graph build, allocator, cuBLAS
            epochs[name]()
    medians = {name: [] for name in layers}
    for _ in range(args.rounds):
        for name, epoch in epochs.items():
            times = []
            for _ in range(args.epochs):
                sync()
                start = time.perf_counter()
                epoch()
                sync()
                times.append(time.perf_counter() - start)
            medians[name].append(statistics.median(times) * 1e3)
    result = {name: {'epoch_ms': statistics.median(m), 'min_ms': min(m), 'max_ms': max(m)}
              for name, m in medians.items()}
    ms = {name: r['epoch_ms'] for name, r in result.items()}
    result['pyg_over_gat_torch'] = ms['pyg'] / ms['gat_torch']
    result['pyg_over_floor'] = ms['pyg'] / ms['floor']
    result['floor_share_of_gat_torch'] = ms['floor'] / ms['gat_torch']
    result['device'] = (torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu')
    result['torch'] = torch.__version__
    for name in layers:
        r = result[name]
        print(f'{name:10s} epoch {r["epoch_ms"]:.3f} ms (rounds {r["min_ms"]:.3f} .. '
              f'{r["max_ms"]:.3f})')
    print(f'pyg / gat_torch {result["pyg_over_gat_torch"]:.2f}x; pyg / floor '
          f'{result["pyg_over_floor"]:.2f}x (the most any layer can give in this script); '
          f'floor / gat_torch {result["floor_share_of_gat_torch"]:.2f}')
    print(json.dumps(result))


if __name__ == '__main__':
    main()
