#!/usr/bin/env python3
"""bench/step_timeline.py on a small synthetic trace (bench/kernel_timeline.cpp's format): the
step's graph found by its optimiser kernel, its launches cut into replays, the median replay
printed in start order with each kernel's gap (negative where it overlaps earlier work), and a
trace without such a graph refused."""
import os
import subprocess
import sys
import tempfile
import unittest

SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "step_timeline.py")


def line(start, end, stream, graph, node, name):
    return f"{start} {end} {stream} {graph} {node} 4 256 {name}\n"


def step_replay(t0, length):
    """One replay of a 3-kernel step graph (graph 7) starting at t0 ns; the last kernel ends at
    t0 + length. The side kernel overlaps the first one."""
    return [line(t0, t0 + 2000, 13, 7, 1, "first_kernel"),
            line(t0 + 1000, t0 + 1500, 16, 7, 2, "side_kernel"),
            line(t0 + 2500, t0 + length, 13, 7, 3, "optimizer_step_kernel")]


class StepTimeline(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gat_test_timeline_")
        self.trace = os.path.join(self.dir.name, "trace.txt")
        lines = [line(0, 900, 13, 0, 0, "eager_kernel")]  # outside any graph
        for i, length in enumerate([6000, 4000, 5000]):    # spans 6, 4 and 5 us
            lines += step_replay(100000 * (i + 1), length)
            lines.append(line(100000 * (i + 1) + 50000, 100000 * (i + 1) + 51000, 13, 9, 1, "eval_kernel"))
        with open(self.trace, "w") as f:
            f.writelines(lines)

    def tearDown(self):
        self.dir.cleanup()

    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT, self.trace, *args], capture_output=True, text=True)

    def test_the_median_replay_in_start_order_with_gaps(self):
        out = self.run_script()
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertIn("graph 7: 3 kernels, 3 replays; span median 5.00 us, min 4.00, max 6.00", lines[0])
        self.assertIn("replay 2 (5.00 us)", lines[1])
        rows = [l.split() for l in lines[3:]]
        self.assertEqual([r[-1] for r in rows], ["first_kernel", "side_kernel", "optimizer_step_kernel"])
        # start, end, duration, gap (us), stream
        self.assertEqual(rows[0][:5], ["0.00", "2.00", "2.00", "0.00", "13"])
        self.assertEqual(rows[1][:5], ["1.00", "1.50", "0.50", "-1.00", "16"])
        self.assertEqual(rows[2][:5], ["2.50", "5.00", "2.50", "0.50", "13"])

    def test_a_chosen_replay_and_graph(self):
        out = self.run_script("--replay", "0")
        self.assertIn("replay 0 (6.00 us)", out.stdout)
        out = self.run_script("--graph-with", "eval_kernel")
        self.assertIn("graph 9: 1 kernels, 3 replays", out.stdout)

    def test_a_replay_out_of_range_is_refused(self):
        out = self.run_script("--replay", "3")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("--replay 3: the graph has replays 0 to 2", out.stderr)

    def test_a_cut_line_is_refused_naming_it(self):
        with open(self.trace, "a") as f:
            f.write("123 456 13\n")
        out = self.run_script()
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("trace.txt:14: not a kernel_timeline line", out.stderr)  # after 13 good lines

    def test_a_trace_without_the_graph_is_refused(self):
        out = self.run_script("--graph-with", "no_such_kernel")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("no replayed graph has a kernel named like 'no_such_kernel'", out.stderr)


if __name__ == "__main__":
    unittest.main()
