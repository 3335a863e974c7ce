#!/usr/bin/env python3
"""Mutation testing: plant one realistic bug at a time and check that a test fails.

Each catalogue (scripts/mutation/<name>.json) lists mutants: a file, an exact piece of text that
occurs once in it, its replacement, the real bug it models and the ctest regex of the tests that
should notice. The runner copies the tree once (tracked and untracked, not ignored, files of the
git work tree), configures and builds it with its own build directory, checks that the relevant
tests pass unmutated, then for each mutant: applies it, rebuilds incrementally (only the test
programs it runs), runs those tests fastest first and stops at the first failure, restores the
file. See docs/mutation.md.

  scripts/mutation/mutate.py --check                       every mutant's text occurs once
  scripts/mutation/mutate.py --catalogue cpu               run the CPU catalogue (GAT_CUDA=OFF)
  scripts/mutation/mutate.py --catalogue cuda --jobs 8     the CUDA catalogue, 8 copies in parallel
  scripts/mutation/mutate.py --only adam_no_bias_correction1 sgd_no_weight_decay   some only
  scripts/mutation/mutate.py --catalogue cuda --jobs 8 --prepare   build the copies, no mutants
"""
import argparse
import concurrent.futures
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
CATALOGUES = {"cpu": {"cuda": "OFF"}, "cuda": {"cuda": "ON"}}
REQUIRED = ("id", "file", "original", "replacement", "models", "tests")
OPTIONAL = ("equivalent",)

print_lock = threading.Lock()


def say(*args):
    with print_lock:
        print(*args, flush=True)


def catalogue_path(name):
    return name if name.endswith(".json") else os.path.join(HERE, name + ".json")


def load_catalogue(name):
    with open(catalogue_path(name)) as f:
        data = json.load(f)
    return data["mutants"]


def check_catalogue(name, root):
    """Problems with a catalogue against the tree at root: one line each (empty: all good)."""
    problems, seen = [], set()
    for m in load_catalogue(name):
        mid = m.get("id", "?")
        missing = [k for k in REQUIRED if not m.get(k) and k != "replacement"]
        unknown = [k for k in m if k not in REQUIRED + OPTIONAL]
        if missing or "replacement" not in m or unknown:
            problems.append(f"{name}:{mid}: fields missing {missing} or unknown {unknown}")
            continue
        if mid in seen:
            problems.append(f"{name}:{mid}: duplicate id")
        seen.add(mid)
        if m["original"] == m["replacement"]:
            problems.append(f"{name}:{mid}: the replacement equals the original")
        try:
            re.compile(m["tests"])
        except re.error as e:
            problems.append(f"{name}:{mid}: bad tests regex: {e}")
        path = os.path.join(root, m["file"])
        if not os.path.isfile(path):
            problems.append(f"{name}:{mid}: no file {m['file']}")
            continue
        with open(path, encoding="utf-8") as f:
            count = f.read().count(m["original"])
        if count != 1:
            problems.append(f"{name}:{mid}: the original text occurs {count} times in {m['file']} "
                            f"(must be once): {m['original']!r}")
    return problems


def run(cmd, cwd=None, timeout=None, env=None):
    """(returncode, combined output); returncode None on timeout."""
    try:
        p = subprocess.run(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=timeout, env=env, text=True, errors="replace")
        return p.returncode, p.stdout
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        return None, out


def tree_files(root):
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=root, check=True, stdout=subprocess.PIPE).stdout
    return sorted({f for f in out.decode().split("\0") if f})


def sync_tree(root, dest):
    """Copies the work tree's files to dest, leaving unchanged files (and their times) alone."""
    for rel in tree_files(root):
        src, dst = os.path.join(root, rel), os.path.join(dest, rel)
        if not os.path.isfile(src) or os.path.islink(src):
            continue
        with open(src, "rb") as f:
            data = f.read()
        if os.path.isfile(dst):
            with open(dst, "rb") as f:
                if f.read() == data:
                    continue
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        with open(dst, "wb") as f:
            f.write(data)
        shutil.copymode(src, dst)


class Copy:
    """One copy of the tree with its own build directory."""

    def __init__(self, path, cuda, build_jobs, object_cache):
        self.path, self.cuda, self.build_jobs = path, cuda, build_jobs
        self.build = os.path.join(path, "build")
        self.object_cache = object_cache  # None: ccache; else compile_cache.py's directory

    def configure(self):
        cmd = ["cmake", "-S", self.path, "-B", self.build, "-G", "Ninja",
               "-DCMAKE_BUILD_TYPE=Release", f"-DGAT_CUDA={self.cuda}", "-DGAT_BENCH=OFF",
               "-DGAT_FUZZ=OFF", "-DGAT_INSTALL=OFF"]
        launcher = "ccache" if self.object_cache is None else \
            f"{sys.executable};{os.path.join(HERE, 'compile_cache.py')}"
        cmd += [f"-DCMAKE_CXX_COMPILER_LAUNCHER={launcher}", f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher}"]
        rc, out = run(cmd)
        if rc != 0:
            sys.exit(f"mutate: configuring {self.path} failed:\n{out}")

    def ninja(self, targets):
        # ccache's base directory is the copy: object files are then shared by every copy and by
        # any checkout built with CCACHE_BASEDIR above it (the paths hashed are relative).
        env = dict(os.environ, CCACHE_BASEDIR=self.path, GAT_MUTATION_ROOT=self.path,
                   GAT_MUTATION_CACHE=self.object_cache or "")
        return run(["ninja", "-C", self.build, f"-j{self.build_jobs}"] + sorted(targets), env=env)

    def ctest_names(self):
        rc, out = run(["ctest", "--test-dir", self.build, "-N"])
        return re.findall(r"Test\s+#\d+: (\S+)", out)

    def run_test(self, name, timeout, env=None):
        """(passed, detail, seconds) for one ctest entry."""
        start = time.time()
        rc, out = run(["ctest", "--test-dir", self.build, "-R", f"^{re.escape(name)}$",
                       "--output-on-failure", "--timeout", str(int(timeout))], timeout=timeout + 30,
                      env=env)
        seconds = time.time() - start
        if rc == 0 and re.search(r"100% tests passed", out):
            return True, "", seconds
        if rc is None or "***Timeout" in out:
            return False, "timeout", seconds
        failed = list(dict.fromkeys(re.findall(r"\[  FAILED  \] (\S+\.\S+)", out)))
        return False, (" ".join(failed) if failed else "crashed or exit code"), seconds


def targets_of(tests):
    # One program per test (tests/CMakeLists.txt: test_X is target gat_test_X); gat_train because
    # some tests run it.
    return {"gat_" + t for t in tests} | {"gat_train"}


def test_environment(root, data_dir):
    """The tests' environment: GAT_DATA_DIR set to the Planetoid folder the tree would find.

    The copies live elsewhere, where the tests' own search (shared/datasets/planetoid beside or
    above the checkout, datasets/registry.cpp) finds nothing: their Planetoid tests would skip.
    """
    env = dict(os.environ)
    if data_dir:
        env["GAT_DATA_DIR"] = os.path.abspath(data_dir)
    elif not env.get("GAT_DATA_DIR"):
        tail = os.path.join("shared", "datasets", "planetoid")
        for up in ("", "..", os.path.join("..", "..")):
            candidate = os.path.normpath(os.path.join(root, up, tail))
            if os.path.isdir(candidate):
                env["GAT_DATA_DIR"] = candidate
                break
    return env


def mutate_one(copy, m, tests, durations, timeout, env):
    path = os.path.join(copy.path, m["file"])
    with open(path, encoding="utf-8") as f:
        original = f.read()
    try:
        if original.count(m["original"]) != 1:
            return {"status": "error", "detail": "the original text does not occur exactly once"}
        with open(path, "w", encoding="utf-8") as f:
            f.write(original.replace(m["original"], m["replacement"]))
        rc, out = copy.ninja(targets_of(tests))
        if rc != 0:
            errors = [l for l in out.splitlines() if "error" in l]
            return {"status": "did-not-build", "detail": (errors[0] if errors else "")[:200]}
        for name in sorted(tests, key=lambda t: durations.get(t, 0)):
            limit = timeout or max(60.0, 5 * durations.get(name, 60.0))
            passed, detail, _ = copy.run_test(name, limit, env)
            if not passed:
                return {"status": "killed", "test": name, "detail": detail}
        return {"status": "survived", "detail": ""}
    finally:
        with open(path, "w", encoding="utf-8") as f:
            f.write(original)
        # The restored file is newer than its object: the next build recompiles it (a ccache hit).


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--catalogue", nargs="+", default=None,
                    help="cpu, cuda or a path to a .json catalogue (--check: default both)")
    ap.add_argument("--check", action="store_true",
                    help="only verify that every mutant's original text occurs once in its file")
    ap.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    ap.add_argument("--prepare", action="store_true",
                    help="build the copies and run the tests unmutated, then stop (a later run "
                         "with the same --workdir and --jobs starts from there)")
    ap.add_argument("--jobs", type=int, default=1, help="independent tree copies building in parallel")
    ap.add_argument("--build-jobs", type=int, default=0,
                    help="ninja -j per copy (default: the cores divided by --jobs)")
    ap.add_argument("--workdir", default=None,
                    help="where the copies live, kept for incremental reruns "
                         "(default: /tmp/gat-mutation-<catalogue>)")
    ap.add_argument("--timeout", type=float, default=0,
                    help="seconds per test (default: 5x its unmutated time, at least 60)")
    ap.add_argument("--cache", choices=("auto", "ccache", "builtin"), default="auto",
                    help="how copies share object files: ccache (auto: where installed) or "
                         "scripts/mutation/compile_cache.py")
    ap.add_argument("--data-dir", default=None,
                    help="the Planetoid folder for the tests (default: GAT_DATA_DIR, else "
                         "shared/datasets/planetoid beside or above the checkout)")
    ap.add_argument("--json", default=None, help="write the results here (default: <workdir>/results.json)")
    ap.add_argument("--root", default=ROOT, help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.check:
        names = args.catalogue or sorted(CATALOGUES)
        problems = [p for n in names for p in check_catalogue(n, args.root)]
        for p in problems:
            print(p)
        total = sum(len(load_catalogue(n)) for n in names)
        print(f"mutate --check: {total} mutants in {', '.join(names)}, {len(problems)} problems")
        return 1 if problems else 0

    names = args.catalogue or ["cpu"]
    if len(names) != 1:
        sys.exit("mutate: run one catalogue at a time (they build differently)")
    name = names[0]
    base = os.path.splitext(os.path.basename(name))[0]
    cuda = CATALOGUES.get(base, {"cuda": "OFF"})["cuda"]
    problems = check_catalogue(name, args.root)
    if problems:
        sys.exit("mutate: the catalogue does not match the tree (run --check):\n" + "\n".join(problems))
    mutants = load_catalogue(name)
    if args.only:
        unknown = set(args.only) - {m["id"] for m in mutants}
        if unknown:
            sys.exit(f"mutate: no mutants {sorted(unknown)} in {name}")
        mutants = [m for m in mutants if m["id"] in args.only]

    jobs = max(1, args.jobs if args.prepare else min(args.jobs, len(mutants)))
    build_jobs = args.build_jobs or max(1, (os.cpu_count() or 1) // jobs)
    workdir = os.path.abspath(args.workdir or f"/tmp/gat-mutation-{base}")
    os.makedirs(workdir, exist_ok=True)
    # One run per work directory: two runs mutating the same copies would build each other's bugs.
    lock = open(os.path.join(workdir, "lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(f"mutate: another run is using {workdir} (--workdir picks another)")
    t0 = time.time()
    use_ccache = args.cache == "ccache" or (args.cache == "auto" and shutil.which("ccache"))
    object_cache = None if use_ccache else os.path.join(workdir, "objects")
    copies = [Copy(os.path.join(workdir, f"copy{k}"), cuda, build_jobs, object_cache)
              for k in range(jobs)]

    # Copy, configure and build every copy (the first with all cores; the others are mostly
    # compiler-cache hits when ccache is found).
    say(f"mutate: {len(mutants)} mutants of {name}, {jobs} copies in {workdir} (GAT_CUDA={cuda}, "
        f"objects shared by {'ccache' if use_ccache else 'compile_cache.py'})")
    for c in copies:  # all at once: every copy holds the same snapshot of the tree
        sync_tree(args.root, c.path)
    all_tests = None
    for c in copies:
        c.configure()
        if all_tests is None:
            all_tests = c.ctest_names()
            wanted = set()
            for m in mutants:
                picked = [t for t in all_tests if re.search(m["tests"], t)]
                if not picked:
                    sys.exit(f"mutate: {m['id']}: no test matches {m['tests']!r}")
                m["_tests"] = picked
                wanted.update(picked)
        saved = c.build_jobs
        c.build_jobs = os.cpu_count() or 1
        rc, out = c.ninja(targets_of(wanted))
        c.build_jobs = saved
        if rc != 0:
            sys.exit(f"mutate: the unmutated tree does not build in {c.path}:\n{out[-4000:]}")
    build_seconds = time.time() - t0
    say(f"mutate: built in {build_seconds:.0f} s; running the {len(wanted)} relevant tests unmutated")

    # The tests must pass unmutated; their times order the runs (fastest first) and set timeouts.
    env = test_environment(args.root, args.data_dir)
    say(f"mutate: GAT_DATA_DIR={env.get('GAT_DATA_DIR', '(unset: Planetoid tests skip)')}")
    durations = {}
    for t in sorted(wanted):
        passed, detail, seconds = copies[0].run_test(t, args.timeout or 900, env)
        if not passed:
            sys.exit(f"mutate: {t} fails on the unmutated tree ({detail}); fix that first")
        durations[t] = seconds
    say("mutate: unmutated: " + ", ".join(f"{t} {s:.1f}s" for t, s in sorted(durations.items())))
    if args.prepare:
        say(f"mutate: prepared {jobs} copies in {time.time() - t0:.0f} s")
        return 0

    free = list(copies)
    free_lock = threading.Lock()
    results = {}

    def work(m):
        with free_lock:
            copy = free.pop()
        start = time.time()
        try:
            r = mutate_one(copy, m, m["_tests"], durations, args.timeout, env)
            r["seconds"] = round(time.time() - start, 1)
        finally:
            with free_lock:
                free.append(copy)
        results[m["id"]] = r
        say(f"  {m['id']:<28} {r['status']:<14} {r.get('test', '')} {r.get('detail', '')} "
            f"({r['seconds']:.0f} s)")
        return r

    t1 = time.time()
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(work, mutants))
    mutate_seconds = time.time() - t1

    # The table and the totals.
    print()
    print(f"{'mutant':<28} {'file':<44} {'status':<14} test")
    for m in mutants:
        r = results[m["id"]]
        note = r.get("test", "") or r.get("detail", "")
        if r["status"] == "survived" and m.get("equivalent"):
            note = "explained: " + m["equivalent"][:60]
        print(f"{m['id']:<28} {m['file']:<44} {r['status']:<14} {note}")
    counts = {s: sum(1 for r in results.values() if r["status"] == s)
              for s in ("killed", "survived", "did-not-build", "error")}
    valid = counts["killed"] + counts["survived"]
    pct = 100.0 * counts["killed"] / valid if valid else 0.0
    unexplained = [m["id"] for m in mutants
                   if results[m["id"]]["status"] == "survived" and not m.get("equivalent")]
    print(f"\n{len(mutants)} mutants: {counts['killed']} killed ({pct:.1f}% of those that built), "
          f"{counts['survived']} survived ({len(unexplained)} unexplained), "
          f"{counts['did-not-build']} did not build, {counts['error']} errors; "
          f"build {build_seconds:.0f} s, mutants {mutate_seconds:.0f} s, "
          f"total {time.time() - t0:.0f} s, {jobs} copies")
    out_json = args.json or os.path.join(workdir, "results.json")
    with open(out_json, "w") as f:
        json.dump({"catalogue": name, "jobs": jobs, "build_seconds": round(build_seconds, 1),
                   "mutants_seconds": round(mutate_seconds, 1),
                   "total_seconds": round(time.time() - t0, 1), "counts": counts,
                   "killed_percent": round(pct, 1), "unexplained_survivors": unexplained,
                   "baseline_test_seconds": {t: round(s, 1) for t, s in durations.items()},
                   "results": {m["id"]: results[m["id"]] for m in mutants}}, f, indent=1)
    print(f"results: {out_json}")
    return 1 if unexplained or counts["error"] else 0


if __name__ == "__main__":
    sys.exit(main())
