#!/usr/bin/env python3
"""Training curves of a gat_train run, drawn with matplotlib from its --log file.

    gat_train --dataset cora --runs 3 --log cora.jsonl
    scripts/plot_curves.py cora.jsonl OUT.png         (or OUT.svg: the format follows the suffix)

Left: training loss and validation loss per epoch; right: training, validation and test
accuracy per epoch. Every run of --runs is drawn, one colour per run. Needs matplotlib
(Debian: python3-matplotlib).
"""
import argparse
import json
import sys
from collections import defaultdict


# The fields plot() draws, each a number (null: a non-finite value, a gap in the curve).
FIELDS = ("loss", "val_loss", "train_acc", "val_acc", "test_acc")


def _integer(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _check_record(record):
    """Raises ValueError unless `record` is one of gat_train's epoch lines."""
    if not isinstance(record, dict):
        raise ValueError("not a JSON object")
    for key in ("run", "epoch"):
        if key not in record:
            raise ValueError("no %r" % key)
        if not _integer(record[key]) or record[key] < (0 if key == "run" else 1):
            raise ValueError("%r is %s, not an integer >= %d" % (key, json.dumps(record[key]), key == "epoch"))
    for key in FIELDS:
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            raise ValueError("%r is %s, not a number" % (key, json.dumps(value)[:60]))


def read_log(path):
    """{run: [epoch record, ...]} from gat_train's JSON lines, epochs in order. A line that is
    not an epoch record of gat_train (no integer run and epoch, a drawn field not a number), an
    epoch given twice in one run (two logs joined), or a file that cannot be read as UTF-8 ends
    the script with a message naming the file and the line."""
    runs = defaultdict(list)
    seen = set()
    try:
        with open(path, encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    _check_record(record)
                except (ValueError, RecursionError) as e:  # JSONDecodeError is a ValueError
                    sys.exit("plot_curves.py: %s:%d: not a gat_train --log line (%s)" % (path, number, e))
                key = (record["run"], record["epoch"])
                if key in seen:
                    sys.exit("plot_curves.py: %s:%d: run %d has epoch %d twice (two logs joined?)"
                             % (path, number, key[0], key[1]))
                seen.add(key)
                runs[record["run"]].append(record)
    except OSError as e:
        sys.exit("plot_curves.py: cannot read %s: %s" % (path, e.strerror or e))
    except UnicodeDecodeError as e:
        sys.exit("plot_curves.py: %s: not UTF-8 text (%s); gat_train writes UTF-8" % (path, e.reason))
    if not runs:
        sys.exit("plot_curves.py: %s: no epochs" % path)
    for records in runs.values():
        records.sort(key=lambda r: r["epoch"])
    return runs


def plot(runs, out, title="", dpi=100):
    """Draws the runs into `out` and returns the matplotlib figure."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no display
    import matplotlib.pyplot as plt

    fig, (loss_ax, acc_ax) = plt.subplots(1, 2, figsize=(11, 4), constrained_layout=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (run, records) in enumerate(sorted(runs.items())):
        colour = colours[i % len(colours)]
        epochs = [r["epoch"] for r in records]
        label = "run %d" % (run + 1)
        loss_ax.plot(epochs, [r["loss"] for r in records], color=colour, lw=1, label=label + " train")
        loss_ax.plot(epochs, [r["val_loss"] for r in records], color=colour, lw=1, ls="--", label=label + " val")
        acc_ax.plot(epochs, [r["train_acc"] for r in records], color=colour, lw=1, alpha=0.5, label=label + " train")
        acc_ax.plot(epochs, [r["val_acc"] for r in records], color=colour, lw=1, ls="--", label=label + " val")
        acc_ax.plot(epochs, [r["test_acc"] for r in records], color=colour, lw=1.5, ls=":", label=label + " test")
    loss_ax.set(xlabel="epoch", ylabel="cross-entropy loss",
                title="loss (solid: training step, dropout on; dashed: val)")
    acc_ax.set(xlabel="epoch", ylabel="accuracy", ylim=(0, 1),
               title="accuracy (solid: train, dashed: val, dotted: test)")
    for ax in (loss_ax, acc_ax):
        ax.grid(alpha=0.3)
    if len(runs) <= 4:
        acc_ax.legend(fontsize="x-small", loc="lower right", ncol=len(runs))
    if title:
        fig.suptitle(title)
    fig.savefig(out, dpi=dpi)
    return fig


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("log", help="gat_train --log file (one JSON object per epoch)")
    parser.add_argument("out", help="picture to write: .png or .svg")
    parser.add_argument("--title", default="", help="a title above the two plots")
    parser.add_argument("--dpi", type=int, default=100, help="PNG resolution (the figure is 11 x 4 inches)")
    args = parser.parse_args()
    if not args.out.lower().endswith((".png", ".svg")):
        parser.error("the picture must end in .png or .svg: %s" % args.out)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.exit("plot_curves.py: matplotlib is not installed (Debian: apt-get install python3-matplotlib)")
    plot(read_log(args.log), args.out, args.title, args.dpi)


if __name__ == "__main__":
    main()
