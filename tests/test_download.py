#!/usr/bin/env python3
"""gat_train fetching the Planetoid files, served over loopback by planetoid_server.py.

    test_download.py GAT_TRAIN

Serves the real Cora files of $GAT_DATA_DIR (their digests are the ones gat ships), well and
badly, and runs gat_train as a user without any data would: no GAT_DATA_DIR, an empty per-user
cache (XDG_CACHE_HOME), GAT_DATASET_URL at the server. Exits 77 (skipped) without Cora.
"""
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
GAT_TRAIN = None
CORA = os.environ.get("GAT_DATA_DIR", "")
PARTS = ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"]


class Server:
    """planetoid_server.py in MODE on a free loopback port, stopped on exit."""

    def __init__(self, mode, folder=CORA):
        self.requests = tempfile.NamedTemporaryFile(prefix="gat_requests_", delete=False).name
        self.process = subprocess.Popen(
            [sys.executable, os.path.join(HERE, "planetoid_server.py"), folder, mode, self.requests],
            stdout=subprocess.PIPE, text=True)
        self.url = "http://127.0.0.1:%s" % self.process.stdout.readline().strip()

    def request_count(self):
        with open(self.requests) as f:
            return len(f.read().split())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.process.kill()
        self.process.wait()
        self.process.stdout.close()
        os.unlink(self.requests)


def closed_port_url():
    """A loopback URL where nothing listens (a port just bound and released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return "http://127.0.0.1:%d" % s.getsockname()[1]


class Download(unittest.TestCase):
    def setUp(self):
        self.home = tempfile.TemporaryDirectory(prefix="gat_test_download_")
        self.cache = os.path.join(self.home.name, "cache", "gat", "planetoid")

    def tearDown(self):
        self.home.cleanup()

    def gat_train(self, url, *args, timeout_s="30", deadline_s="600"):
        env = {k: v for k, v in os.environ.items() if k != "GAT_DATA_DIR"}
        env.update(XDG_CACHE_HOME=os.path.join(self.home.name, "cache"), GAT_DATASET_URL=url,
                   GAT_DOWNLOAD_TIMEOUT=timeout_s, GAT_DOWNLOAD_DEADLINE=deadline_s)
        start = time.monotonic()
        done = subprocess.run([GAT_TRAIN, "--dataset", "cora", *args], env=env, capture_output=True, text=True,
                              timeout=120)
        return done, time.monotonic() - start

    def cached(self):
        return sorted(os.listdir(self.cache)) if os.path.isdir(self.cache) else []

    def test_good_download_is_verified_cached_and_trains(self):
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--device", "cpu", "--epochs", "3", "--json")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(self.cached(), sorted("ind.cora." + p for p in PARTS))
            self.assertIn("SHA-256 verified", done.stderr)
            self.assertIn('"dataset":"cora"', done.stdout.strip().splitlines()[-1])
            self.assertEqual(server.request_count(), 8)
            # A second load reads the cache: no request reaches the server.
            again, _ = self.gat_train(server.url, "--info")
            self.assertEqual(again.returncode, 0, again.stderr)
            self.assertIn('"nodes":2708', again.stdout)
            self.assertNotIn("download:", again.stderr)
            self.assertEqual(server.request_count(), 8)

    def test_only_missing_files_are_fetched(self):
        os.makedirs(self.cache)
        for part in PARTS[1:]:
            os.symlink(os.path.join(CORA, "ind.cora." + part), os.path.join(self.cache, "ind.cora." + part))
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--info")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(server.request_count(), 1)

    def expect_refused(self, done, *parts):
        self.assertEqual(done.returncode, 1, done.stderr)
        for part in ("ind.cora.x", self.cache, "by hand") + parts:
            self.assertIn(part, done.stderr)
        self.assertEqual(self.cached(), [], "nothing may be left in the cache")

    def test_corrupted_file_is_refused_and_not_kept(self):
        with Server("corrupt") as server:
            done, _ = self.gat_train(server.url, "--info")
            self.expect_refused(done, "SHA-256", "expected 23cfa55d", server.url + "/ind.cora.x")

    def test_truncated_download_is_refused(self):
        with Server("truncate") as server:
            done, _ = self.gat_train(server.url, "--info")
            self.expect_refused(done, "transfer closed", server.url + "/ind.cora.x")

    def test_stalled_server_times_out(self):
        with Server("stall") as server:
            done, seconds = self.gat_train(server.url, "--info", timeout_s="1")
            self.expect_refused(done, "no data for 1 s", "GAT_DOWNLOAD_TIMEOUT")
            self.assertLess(seconds, 10)

    def test_quiet_download_prints_no_progress(self):
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--info", "--quiet")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(done.stderr, "")
            self.assertEqual(len(self.cached()), 8)

    def test_trickling_server_meets_the_deadline(self):
        # One byte every 0.5 s is never a stall (timeout 30 s), but all the downloads together
        # may take GAT_DOWNLOAD_DEADLINE seconds.
        with Server("trickle") as server:
            done, seconds = self.gat_train(server.url, "--info", deadline_s="2")
            self.expect_refused(done, "took more than 2 s in all", "GAT_DOWNLOAD_DEADLINE")
            self.assertLess(seconds, 10)

    def test_offline_says_how_to_get_the_data(self):
        url = closed_port_url()
        done, _ = self.gat_train(url, "--device", "cpu", "--epochs", "1")
        self.expect_refused(done, url + "/ind.cora.x",
                            "ind.cora.{x,tx,allx,y,ty,ally,graph,test.index} from " + url + "/",
                            "--data-dir", "GAT_DATA_DIR")

    def plant(self, name, text="a killed download's"):
        os.makedirs(self.cache, exist_ok=True)
        with open(os.path.join(self.cache, name), "w") as f:
            f.write(text)

    def test_stale_temporary_of_a_killed_download_is_removed(self):
        # A download killed before its rename leaves FILE.gat-<pid>-XXXXXX.tmp; <pid> is gone.
        self.plant("ind.cora.x.gat-999999999-aB3dE9.tmp")
        self.plant("ind.cora.x.gat-999999998-Zz0000.tmp")
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--info", "--quiet")
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.cached(), sorted("ind.cora." + p for p in PARTS))

    def test_stale_temporary_beside_a_file_already_there_is_removed(self):
        # The file was put there by hand after the kill: nothing is downloaded, the leftover still goes.
        os.makedirs(self.cache)
        for part in PARTS:
            os.symlink(os.path.join(CORA, "ind.cora." + part), os.path.join(self.cache, "ind.cora." + part))
        self.plant("ind.cora.graph.gat-999999999-aB3dE9.tmp")
        self.plant("unrelated.gat-999999999-aB3dE9.tmp", "not a Cora file's")
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--info", "--quiet")
            self.assertEqual(done.returncode, 0, done.stderr)
            self.assertEqual(server.request_count(), 0)
        self.assertEqual(self.cached(), sorted(["unrelated.gat-999999999-aB3dE9.tmp"] +
                                               ["ind.cora." + p for p in PARTS]))

    def test_temporary_of_a_download_in_another_process_is_kept(self):
        # <pid> runs (this test): that download is in progress and its file must stay.
        live = "ind.cora.x.gat-%d-aB3dE9.tmp" % os.getpid()
        self.plant(live, "in progress")
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--info", "--quiet")
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.cached(), sorted([live] + ["ind.cora." + p for p in PARTS]))
        with open(os.path.join(self.cache, live)) as f:
            self.assertEqual(f.read(), "in progress")

    def test_old_style_temporary_is_removed_once_it_is_ten_minutes_old(self):
        # Before downloads went through io::OutputFile, a killed one left .FILE.XXXXXX, with no
        # pid: nothing ever removed it. Its writer lived seconds, so one unchanged for ten minutes
        # goes; a fresh one (an old binary's download, maybe in progress) and look-alikes stay.
        old, fresh = ".ind.cora.x.aB3dE9", ".ind.cora.graph.Zz0000"
        keep = [fresh, ".ind.cora.x.aB3dE", ".ind.cora.x.aB3dE9.tmp", ".unrelated.aB3dE9"]
        for name in [old] + keep:
            self.plant(name)
        hour_ago = time.time() - 3600
        for name in [old] + keep[1:]:
            os.utime(os.path.join(self.cache, name), (hour_ago, hour_ago))
        with Server("good") as server:
            done, _ = self.gat_train(server.url, "--info", "--quiet")
            self.assertEqual(done.returncode, 0, done.stderr)
        self.assertEqual(self.cached(), sorted(keep + ["ind.cora." + p for p in PARTS]))

    def test_bad_timeout_setting_is_an_error(self):
        done, _ = self.gat_train(closed_port_url(), "--info", timeout_s="soon")
        self.assertEqual(done.returncode, 1)
        self.assertIn("GAT_DOWNLOAD_TIMEOUT='soon'", done.stderr)


if __name__ == "__main__":
    GAT_TRAIN = sys.argv.pop(1)
    if not os.path.isfile(os.path.join(CORA, "ind.cora.x")):
        print("skipped: the Cora files to serve are not in GAT_DATA_DIR ('%s')" % CORA)
        sys.exit(77)
    unittest.main(verbosity=2)
