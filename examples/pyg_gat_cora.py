"""PyTorch Geometric's GAT example on Cora, with the layers of gat_torch.

The same script as PyTorch Geometric's: a 2-layer GAT (8 heads x 8 hidden channels, ELU, then
one head averaged), feature and attention dropout 0.6, Adam (lr 0.005, weight decay 5e-4),
200 epochs, full-batch on Planetoid Cora with NormalizeFeatures.  The differences: GATConv
comes from gat_torch, or from torch_geometric.nn with --pyg, for a comparison; and the body is in
functions behind __main__, so that bench/cora_epoch.py can import the model (GAT takes the layer
class), the training step and the evaluation.

    PYTHONPATH=<build>/python python examples/pyg_gat_cora.py \
        --raw-dir /path/to/planetoid --root /tmp/planetoid [--pyg] [--seeds 10] [--device cuda]

--raw-dir names a folder holding the raw Planetoid files (ind.cora.x, ...); they are linked (or
copied) into ROOT/Cora/raw before the dataset is built, so no download is needed.  Each epoch
prints the loss and the training, validation and test accuracies; the end prints the mean time
per epoch (one training step plus one evaluation) and the test accuracy at the epoch of best validation
accuracy, as a mean and standard deviation over --seeds runs.
"""
import argparse
import os
import os.path as osp
import shutil
import statistics
import time

import torch
import torch.nn.functional as F

import torch_geometric.transforms as T
from torch_geometric.datasets import Planetoid


def parse_args():
    parser = argparse.ArgumentParser()
    parser.add_argument('--dataset', type=str, default='Cora')
    parser.add_argument('--hidden_channels', type=int, default=8)
    parser.add_argument('--heads', type=int, default=8)
    parser.add_argument('--lr', type=float, default=0.005)
    parser.add_argument('--epochs', type=int, default=200)
    parser.add_argument('--root', type=str,
                        default=osp.join(osp.dirname(osp.realpath(__file__)), '..', 'data',
                                         'Planetoid'),
                        help='Planetoid root: the dataset lives in ROOT/<dataset>/')
    parser.add_argument('--raw-dir', type=str, default=None,
                        help='folder with the raw files ind.<dataset>.*, linked into '
                        'ROOT/<dataset>/raw')
    parser.add_argument('--pyg', action='store_true', help="use torch_geometric.nn's GATConv")
    parser.add_argument('--seeds', type=int, default=1, help='runs, with seeds 0..N-1')
    parser.add_argument('--device', type=str,
                        default='cuda' if torch.cuda.is_available() else 'cpu')
    parser.add_argument('--quiet', action='store_true', help='no per-epoch lines')
    return parser.parse_args()


def link_raw_files(raw_dir, root, name):
    """Put the raw Planetoid files of `name` from raw_dir into root/name/raw (symlinks, or
    copies where links cannot be made)."""
    target = osp.join(root, name, 'raw')
    os.makedirs(target, exist_ok=True)
    for part in ['x', 'tx', 'allx', 'y', 'ty', 'ally', 'graph', 'test.index']:
        file = f'ind.{name.lower()}.{part}'
        src, dst = osp.join(raw_dir, file), osp.join(target, file)
        if not osp.isfile(src):
            raise FileNotFoundError(f'--raw-dir: {src} is missing')
        if osp.exists(dst):
            continue
        try:
            os.symlink(osp.abspath(src), dst)
        except OSError:
            shutil.copyfile(src, dst)


class GAT(torch.nn.Module):
    def __init__(self, in_channels, hidden_channels, out_channels, heads, GATConv):
        super().__init__()
        self.conv1 = GATConv(in_channels, hidden_channels, heads, dropout=0.6)
        # On the Pubmed dataset, use `heads` output heads in `conv2`.
        self.conv2 = GATConv(hidden_channels * heads, out_channels, heads=1,
                             concat=False, dropout=0.6)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.6, training=self.training)
        x = F.elu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.6, training=self.training)
        x = self.conv2(x, edge_index)
        return x


def train(model, optimizer, data):
    model.train()
    optimizer.zero_grad()
    out = model(data.x, data.edge_index)
    loss = F.cross_entropy(out[data.train_mask], data.y[data.train_mask])
    loss.backward()
    optimizer.step()
    return float(loss.detach())


@torch.no_grad()
def test(model, data):
    model.eval()
    pred = model(data.x, data.edge_index).argmax(dim=-1)

    accs = []
    for mask in [data.train_mask, data.val_mask, data.test_mask]:
        accs.append(int((pred[mask] == data.y[mask]).sum()) / int(mask.sum()))
    return accs


def run(seed, args, dataset, data, GATConv):
    device = data.x.device

    def sync():
        if device.type == 'cuda':
            torch.cuda.synchronize(device)

    torch.manual_seed(seed)
    model = GAT(dataset.num_features, args.hidden_channels, dataset.num_classes,
                args.heads, GATConv).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=5e-4)

    times = []
    best_val_acc = test_acc = 0
    for epoch in range(1, args.epochs + 1):
        sync()
        start = time.perf_counter()
        loss = train(model, optimizer, data)
        train_acc, val_acc, tmp_test_acc = test(model, data)
        sync()
        times.append(time.perf_counter() - start)
        if val_acc > best_val_acc:
            best_val_acc = val_acc
            test_acc = tmp_test_acc
        if not args.quiet:
            print(f'Epoch: {epoch:03d}, Loss: {loss:.4f}, Train: {train_acc:.4f}, '
                  f'Val: {val_acc:.4f}, Test: {tmp_test_acc:.4f}')
    # the first epoch holds one-time costs (graph build, allocations): timed apart
    mean_time = statistics.mean(times[1:]) if len(times) > 1 else times[0]
    print(f'Seed {seed}: mean time per epoch (after the first): {mean_time:.4f}s '
          f'(first {times[0]:.4f}s), test accuracy at best val ({best_val_acc:.4f}): '
          f'{test_acc:.4f}')
    return mean_time, test_acc


def main():
    args = parse_args()
    if args.pyg:
        from torch_geometric.nn import GATConv
    else:
        from gat_torch import GATConv
    device = torch.device(args.device)

    if args.raw_dir is not None:
        link_raw_files(args.raw_dir, args.root, args.dataset)
    dataset = Planetoid(args.root, args.dataset, transform=T.NormalizeFeatures())
    data = dataset[0].to(device)

    layers = 'torch_geometric.nn' if args.pyg else 'gat_torch'
    print(f'GATConv from {layers} on {args.dataset}, device {device}')
    results = [run(seed, args, dataset, data, GATConv) for seed in range(args.seeds)]
    times = [t for t, _ in results]
    accs = [a for _, a in results]
    if len(results) == 1:
        print(f'Mean time per epoch: {times[0]:.4f}s, test accuracy: {accs[0]:.4f}')
    else:
        print(f'Mean time per epoch: {statistics.mean(times):.4f}s ± '
              f'{statistics.stdev(times):.4f}, test accuracy over {len(accs)} seeds: '
              f'{statistics.mean(accs):.4f} ± {statistics.stdev(accs):.4f}')


if __name__ == '__main__':
    main()
