#!/usr/bin/env python3
"""gat_bench shares gat_train's guards (framework/process.h): a refused environment (too many
OpenMP threads, a small stack) and a failed write of stdout (past ulimit -f, into a closed pipe)
end in a message and exit status 1, never in a signal. Usage: test_gat_bench_guards.py GAT_BENCH"""
import os
import resource
import struct
import subprocess
import sys
import tempfile
import unittest

BENCH = sys.argv.pop(1) if len(sys.argv) > 1 else "build/bench/gat_bench"


class GatBenchGuards(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gat_test_bench_")
        # A graph file of 2 nodes and one edge 0 -> 1: int64 N, int64 E, int32 row_ptr[N+1], int32 col[E].
        self.graph = os.path.join(self.dir.name, "g.bin")
        with open(self.graph, "wb") as f:
            f.write(struct.pack("<qq3ii", 2, 1, 0, 0, 1, 0))
        self.args = [BENCH, "kernel", "--graph", self.graph, "--device", "cpu", "--heads", "1", "--features", "4"]

    def tearDown(self):
        self.dir.cleanup()

    def run_bench(self, env=None, limit=None, stdout=subprocess.PIPE):
        preexec = (lambda: resource.setrlimit(*limit)) if limit else None
        return subprocess.run(self.args, env=dict(os.environ, **(env or {})), preexec_fn=preexec, stdout=stdout,
                              stderr=subprocess.PIPE, timeout=120)

    def expect_refusal(self, r, message):
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn(message, r.stderr.decode())

    def test_the_fixture_runs(self):
        r = self.run_bench()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(b'"workload":"kernel"', r.stdout)

    def test_too_many_threads(self):
        self.expect_refusal(self.run_bench(env={"OMP_NUM_THREADS": "100000"}),
                            "gat_bench: OMP_NUM_THREADS asks for 100000 threads, more than 4096")

    def test_a_small_stack(self):
        self.expect_refusal(self.run_bench(limit=(resource.RLIMIT_STACK, (32 << 10, resource.RLIM_INFINITY))),
                            "gat_bench: the stack limit (ulimit -s) is 32 KiB, less than the 64 KiB")

    def test_stdout_past_the_file_size_limit(self):  # SIGXFSZ killed it without a word
        with open(os.path.join(self.dir.name, "out.json"), "wb") as out:
            r = self.run_bench(limit=(resource.RLIMIT_FSIZE, (0, 0)), stdout=out)
        self.expect_refusal(r, "gat_bench: writing the output to stdout failed")

    def test_stdout_a_closed_pipe(self):  # SIGPIPE killed it without a word
        read_end, write_end = os.pipe()
        os.close(read_end)
        with os.fdopen(write_end, "wb") as out:
            r = self.run_bench(stdout=out)
        self.expect_refusal(r, "gat_bench: writing the output to stdout failed")


class GatBenchFlags(unittest.TestCase):
    """Sizes and files are checked before any work (hostile campaign 6): --batch-size 0 divided by
    zero (SIGFPE), --heads 0 timed empty tensors with exit status 0, /dev/zero read as an empty graph."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="gat_test_bench_")
        self.graph = os.path.join(self.dir.name, "g.bin")
        with open(self.graph, "wb") as f:
            f.write(struct.pack("<qq3ii", 2, 1, 0, 0, 1, 0))

    def tearDown(self):
        self.dir.cleanup()

    def refused(self, args, message):
        r = subprocess.run([BENCH] + args + ["--device", "cpu"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=120)
        self.assertGreater(r.returncode, 0, r.stderr)  # an exit status, not a signal
        self.assertIn(message, r.stderr.decode())

    def sampled(self, *extra):
        return ["sampled", "--nodes", "200", "--degree", "4", "--features", "4", "--classes", "2", "--train", "20",
                "--val", "20"] + list(extra)

    def test_a_batch_size_of_zero(self):
        self.refused(self.sampled("--batch-size", "0"), "--batch-size: Value 0 not in range")

    def test_a_negative_batch_size(self):
        self.refused(self.sampled("--batch-size", "-4"), "--batch-size: Value -4 not in range")

    def test_one_fanout_for_two_layers(self):
        self.refused(self.sampled("--fanouts", "5"), "--fanouts: 1 fanouts, the model has 2 layers")

    def test_zero_heads(self):
        self.refused(["kernel", "--graph", self.graph, "--heads", "0"], "--heads: Value 0 not in range")

    def test_bytes_after_the_graph(self):
        with open(self.graph, "ab") as f:
            f.write(b"junk")
        self.refused(["kernel", "--graph", self.graph], "bytes after the 2 nodes and 1 edges announced")

    def test_dev_zero_is_no_graph(self):
        self.refused(["kernel", "--graph", "/dev/zero"], "/dev/zero: bytes after the 0 nodes and 0 edges announced")

    def test_zero_classes(self):  # divided by zero (SIGFPE), hostile round 8
        args = self.sampled()
        args[args.index("--classes") + 1] = "0"
        self.refused(args, "--classes 0 must be positive")

    def test_a_negative_seed(self):  # read as 2^64 - 1 without a word
        self.refused(self.sampled("--seed", "-1"), "--seed")

    def test_an_empty_graph_file(self):  # said "bad header (0 nodes, 0 edges; each count in range)"
        self.refused(["kernel", "--graph", "/dev/null"], "/dev/null: shorter than the 16-byte header")

    def test_a_node_count_beyond_int32(self):
        with open(self.graph, "wb") as f:
            f.write(struct.pack("<qq", 1 << 61, 0))
        self.refused(["kernel", "--graph", self.graph], "bad header (2305843009213693952 nodes, 0 edges")


class GatBenchWrite(unittest.TestCase):
    """sampled --write DIR writes its files as gat_train writes outputs: a link planted in DIR is
    refused, not written through (the file it named was overwritten with the features)."""

    def test_a_link_in_the_folder_is_not_followed(self):
        with tempfile.TemporaryDirectory(prefix="gat_test_bench_") as top:
            victim, out = os.path.join(top, "victim"), os.path.join(top, "out")
            os.mkdir(out)
            with open(victim, "w") as f:
                f.write("precious")
            os.symlink(victim, os.path.join(out, "x.bin"))
            r = subprocess.run([BENCH, "sampled", "--nodes", "200", "--degree", "4", "--features", "4", "--classes",
                                "2", "--train", "20", "--val", "20", "--device", "cpu", "--no-eval", "--write", out],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("x.bin is a symbolic link", r.stderr.decode())
            with open(victim) as f:
                self.assertEqual(f.read(), "precious")


if __name__ == "__main__":
    unittest.main()
