#!/usr/bin/env python3
"""scripts/plot_curves.py on a small gat_train log: every run drawn with its logged values, PNG
and SVG files written, bad logs refused naming the line. Needs matplotlib (gat.sh deps installs
Debian's python3-matplotlib)."""
import json
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts")
sys.path.insert(0, SCRIPTS)
import plot_curves  # noqa: E402


def epoch_record(run, epoch):
    return {"run": run, "epoch": epoch, "loss": 2.0 - 0.1 * epoch - run, "val_loss": 1.9 - 0.05 * epoch,
            "train_acc": 0.1 * epoch, "val_acc": 0.05 * epoch + 0.01 * run, "test_acc": 0.04 * epoch, "ms": 1.0}


class PlotCurves(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gat_test_plot_")
        self.log = os.path.join(self.dir.name, "log.jsonl")
        # Two runs of different lengths (early stopping ends them apart), lines out of order.
        records = [epoch_record(0, e) for e in range(1, 6)] + [epoch_record(1, e) for e in range(1, 9)]
        with open(self.log, "w") as f:
            for r in reversed(records):
                f.write(json.dumps(r) + "\n")

    def tearDown(self):
        self.dir.cleanup()

    def test_every_run_is_drawn_with_its_values(self):
        fig = plot_curves.plot(plot_curves.read_log(self.log), os.path.join(self.dir.name, "c.png"))
        loss_ax, acc_ax = fig.axes
        self.assertEqual(len(loss_ax.lines), 2 * 2)  # train and val loss per run
        self.assertEqual(len(acc_ax.lines), 2 * 3)   # train, val and test accuracy per run
        run1_val_acc = acc_ax.lines[4]
        self.assertEqual(list(run1_val_acc.get_xdata()), list(range(1, 9)))
        self.assertEqual(list(run1_val_acc.get_ydata()), [epoch_record(1, e)["val_acc"] for e in range(1, 9)])
        self.assertEqual(list(loss_ax.lines[0].get_ydata()), [epoch_record(0, e)["loss"] for e in range(1, 6)])

    def run_script(self, *args):
        return subprocess.run([sys.executable, os.path.join(SCRIPTS, "plot_curves.py"), *args],
                              capture_output=True, text=True)

    def test_writes_png_and_svg(self):
        png, svg = os.path.join(self.dir.name, "c.png"), os.path.join(self.dir.name, "c.svg")
        for out in (png, svg):
            done = self.run_script(self.log, out, "--title", "test")
            self.assertEqual(done.returncode, 0, done.stderr)
        with open(png, "rb") as f:
            head = f.read(24)
        self.assertEqual(head[:8], b"\x89PNG\r\n\x1a\n")
        self.assertEqual((int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")), (1100, 400))
        with open(svg) as f:
            self.assertIn("<svg", f.read(2000))

    def test_bad_input_is_refused(self):
        with open(self.log, "a") as f:
            f.write('{"epoch": 3}\n')
        done = self.run_script(self.log, os.path.join(self.dir.name, "c.png"))
        self.assertNotEqual(done.returncode, 0)
        self.assertIn("log.jsonl:14", done.stderr)
        done = self.run_script(self.log, os.path.join(self.dir.name, "c.gif"))
        self.assertEqual(done.returncode, 2)
        self.assertIn(".png or .svg", done.stderr)

    def test_malformed_records_are_refused_naming_the_line(self):
        """Each of these ended in a Python traceback (KeyError, TypeError, RecursionError,
        UnicodeDecodeError, FileNotFoundError) or, for a run of 0.5, was drawn as run 0."""
        good = json.dumps(epoch_record(0, 1))
        cases = [
            ('{"run": 0, "loss": 1}', "log.jsonl:1: not a gat_train --log line (no 'epoch')"),
            (good + "\n" + good.replace('"epoch": 1', '"epoch": "2"'), "log.jsonl:2:", "'epoch' is \"2\""),
            (good.replace('"run": 0', '"run": 0.5'), "'run' is 0.5, not an integer"),
            (good.replace('"loss": ', '"loss": "x", "was": '), "'loss' is \"x\", not a number"),
            (good + "\n" + good, "log.jsonl:2: run 0 has epoch 1 twice"),
            ("[" * 100000 + "]" * 100000, "log.jsonl:1: not a gat_train --log line"),
        ]
        for text, *parts in cases:
            with open(self.log, "w") as f:
                f.write(text + "\n")
            with self.assertRaises(SystemExit) as stop:
                plot_curves.read_log(self.log)
            for part in parts:
                self.assertIn(part, str(stop.exception))
        with open(self.log, "wb") as f:
            f.write((good + "\n").encode("utf-16"))
        with self.assertRaises(SystemExit) as stop:
            plot_curves.read_log(self.log)
        self.assertIn("not UTF-8 text", str(stop.exception))
        with self.assertRaises(SystemExit) as stop:
            plot_curves.read_log(os.path.join(self.dir.name, "missing.jsonl"))
        self.assertIn("cannot read", str(stop.exception))
        with open(self.log, "w") as f:  # null: gat_train's non-finite value, a gap
            f.write(good.replace('"loss": ', '"loss": null, "was": ') + "\n")
        self.assertIsNone(plot_curves.read_log(self.log)[0][0]["loss"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
