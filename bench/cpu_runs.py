#!/usr/bin/env python3
"""Whole training runs on two CPU cores: PyTorch Geometric's GAT and this project's gat_train
(`--model gatv2`: both sides with GATv2Conv layers).

For each dataset it measures what a multi-seed run of the paper's recipe costs on two pinned cores
(2 threads), trained to its early stop, and the accuracy it reaches:

  PyG   compare_pyg.pyg_gat with the recipe of compare_pyg.pyg_training (GATConv 8 heads x 8,
        dropout 0.6 on the inputs and the attention, ELU, GATConv 1 head; Adam lr 0.005, weight
        decay 5e-4; NormalizeFeatures), torch.manual_seed(seed), evaluated every epoch in eval mode, and
        stopped by train/trainer.cpp's rule: an epoch improves when val acc >= best or val loss
        <= best (the patience counter restarts); when both hold, its test accuracy is the run's;
        stop after 100 epochs without improvement. With --model gatv2: GATv2Conv layers, the
        same recipe. The seeds are dealt round-robin to --pairs
        worker processes at once, each pinned to its own two cores; a seed's time runs from model
        construction to the stop (dataset loading is timed apart, once per worker). PyG's total
        is the sum of the seeds' times: what one 2-core process would take for all of them.
  ours  `taskset -c A,B BUILD/gat_train --device cpu --model M --runs SEEDS --seed FIRST --json --quiet`
        with OMP_NUM_THREADS=2 on the next free core pair, at the same time as the PyG workers (so
        both see the same machine load), timed as a whole process (start, loading and all runs).
        Its start and loading are timed apart afterwards: `gat_train --info` on the same cores.

Run on a machine with at least 2 * (pairs + 1) cores (default 12), PyTorch and torch_geometric
(whose Planetoid reader needs scipy), after building this project (BUILD/gat_train must exist):

    python3 bench/cpu_runs.py --build build --data-dir DIR --out out
    python3 bench/cpu_runs.py --model gatv2 ... --out out/gatv2     # GATv2 on both sides

(gat_train's GAT drops the projected features too, --value-dropout 0.6, which PyG's GATConv does
not; GATv2Conv has no such dropout on either side, so --model gatv2 compares one recipe.)

With two cores only: `--pairs 1 --sequential` (ours runs after PyG, on the same cores). A quick
check: `--seeds 2 --max-epochs 30`. A run too long for one command can be split by seeds and
datasets and merged (each part's table compares PyG and ours over the same seeds and load):

    python3 bench/cpu_runs.py --datasets citeseer --first-seed 0 --seeds 5 --out out/a
    python3 bench/cpu_runs.py --datasets citeseer --first-seed 5 --seeds 5 --out out/b
    python3 bench/cpu_runs.py --merge out/a/cpu_runs.json out/b/cpu_runs.json --out out

Datasets run one after the other; OUT/cpu_runs.json (the only file written to OUT) gets every
figure, rewritten after each dataset, so a run cut short keeps the datasets already done; each
seed's PyG result is printed as it finishes. A failed worker or gat_train ends the script with a
non-zero status and the end of that process's output (its logs are kept in a temporary folder,
named then). Nothing is built here and nothing is downloaded.
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PATIENCE = 100
PROGRESS = "progress: "  # a worker's stderr lines that the parent shows as they come


# ---------------------------------------------------------------------------------------------
# Worker: one process, pinned to two cores, training PyG's GAT for some seeds on one dataset.
# ---------------------------------------------------------------------------------------------

def worker_main(argv):
    ap = argparse.ArgumentParser(prog="cpu_runs.py _worker")
    ap.add_argument("--cores", required=True, help="e.g. 0,1")
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--data-dir", required=True)
    ap.add_argument("--seed-list", required=True, help="e.g. 0,5")
    ap.add_argument("--max-epochs", type=int, required=True)
    ap.add_argument("--model", required=True, choices=["gat", "gatv2"])
    ap.add_argument("--result", required=True, help="JSON file to write")
    args = ap.parse_args(argv)
    cores = [int(c) for c in args.cores.split(",")]

    # Pin, and size the thread pools, before torch starts any thread (threads inherit the mask).
    os.sched_setaffinity(0, cores)
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(len(cores))
    import torch
    torch.set_num_threads(len(cores))
    import torch_geometric
    sys.path.insert(0, HERE)
    from compare_pyg import pyg_planetoid  # imports torch only; needs no GPU

    # pyg_planetoid makes its folder with tempfile.mkdtemp and leaves it: keep it in ours.
    tempfile.tempdir = tempfile.mkdtemp(prefix="cpu_runs_pyg_")
    try:
        t0 = time.perf_counter()
        data = pyg_planetoid(args.dataset, args.data_dir, torch.device("cpu"))
        load_s = time.perf_counter() - t0
        result = {"cores": cores, "affinity": sorted(os.sched_getaffinity(0)),
                  "torch_threads": torch.get_num_threads(), "torch": torch.__version__,
                  "torch_geometric": torch_geometric.__version__, "load_s": load_s, "runs": []}
        for seed in [int(s) for s in args.seed_list.split(",")]:
            r = train_one(data, seed, args.max_epochs, args.model)
            result["runs"].append(r)
            print(f"{PROGRESS}{args.dataset} PyG seed {seed} (cores {args.cores}): {r['epochs']} epochs, "
                  f"test acc {100 * r['test_acc']:.1f} %, {r['seconds']:.1f} s, "
                  f"{r['seconds'] / r['epochs'] * 1e3:.1f} ms per epoch", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tempfile.tempdir, ignore_errors=True)
    with open(args.result, "w") as fh:
        json.dump(result, fh)


def train_one(data, seed, max_epochs, model_name):
    """One training run to the early stop; the model is compare_pyg.pyg_gat(data, model_name)."""
    import torch
    import torch.nn.functional as F
    from compare_pyg import pyg_gat

    torch.manual_seed(seed)
    start = time.perf_counter()
    model = pyg_gat(data, model_name)
    opt = torch.optim.Adam(model.parameters(), lr=0.005, weight_decay=5e-4)
    best_acc, best_loss, wait = 0.0, float("inf"), 0
    best = {"test_acc": None, "val_acc": None, "val_loss": None, "best_epoch": 0}
    step_s = 0.0
    epoch = 0
    for epoch in range(1, max_epochs + 1):
        t0 = time.perf_counter()
        model.train()
        opt.zero_grad()
        loss = F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask])
        loss.backward()
        opt.step()
        step_s += time.perf_counter() - t0

        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
            val_loss = float(F.cross_entropy(out[data.val_mask], data.y[data.val_mask]))
            pred = out.argmax(-1)
            val_acc = float((pred[data.val_mask] == data.y[data.val_mask]).float().mean())
            test_acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())

        # train/trainer.cpp's rule.
        if val_acc >= best_acc or val_loss <= best_loss:
            if val_acc >= best_acc and val_loss <= best_loss:
                best = {"test_acc": test_acc, "val_acc": val_acc, "val_loss": val_loss, "best_epoch": epoch}
            best_acc, best_loss, wait = max(best_acc, val_acc), min(best_loss, val_loss), 0
        else:
            wait += 1
            if wait == PATIENCE:
                break
    seconds = time.perf_counter() - start
    return {"seed": seed, "epochs": epoch, **best, "seconds": seconds,
            "train_step_ms": step_s / epoch * 1e3}


# ---------------------------------------------------------------------------------------------
# Parent: launches the workers and gat_train, waits, checks, prints and saves.
# ---------------------------------------------------------------------------------------------

class Job:
    """A child process with its stdout and stderr in files (no pipes to fill while we wait)."""

    def __init__(self, name, tag, cmd, logdir, env=None):
        self.name, self.cmd = name, cmd
        self.out_path = os.path.join(logdir, f"{tag}.out")
        self.err_path = os.path.join(logdir, f"{tag}.err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.start = time.perf_counter()
            self.proc = subprocess.Popen(cmd, stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env)
        self.seconds = None
        self.err_seen = 0  # bytes of stderr already scanned for progress lines

    def poll(self):
        rc = self.proc.poll()
        if rc is not None and self.seconds is None:
            self.seconds = time.perf_counter() - self.start
        return rc

    def show_progress(self):
        with open(self.err_path) as fh:
            fh.seek(self.err_seen)
            text = fh.read()
        text = text[:text.rfind("\n") + 1]  # whole lines only
        self.err_seen += len(text.encode())
        for line in text.splitlines():
            if line.startswith(PROGRESS):
                print("  " + line[len(PROGRESS):], flush=True)

    def stdout(self):
        with open(self.out_path) as fh:
            return fh.read()

    def error(self, lines=40):
        with open(self.err_path) as fh:
            err = fh.read().strip().splitlines()
        with open(self.out_path) as fh:
            out = fh.read().strip().splitlines()
        text = [f"--- {self.name} failed (exit {self.proc.returncode}): {' '.join(self.cmd)}"]
        if out:
            text += ["--- stdout (end):", *out[-10:]]
        text += ["--- stderr (end):", *err[-lines:]]
        return "\n".join(text)


class Failed(Exception):
    pass


def wait_all(jobs, timeout):
    """Wait for every job; on the first failure, the timeout or a signal, end the others."""
    deadline = time.perf_counter() + timeout if timeout else None
    pending = list(jobs)
    try:
        while pending:
            for job in list(pending):
                rc = job.poll()
                job.show_progress()
                if rc is None:
                    continue
                pending.remove(job)
                if rc != 0:
                    raise Failed(job.error())
                print(f"  {job.name}: done in {job.seconds:.1f} s", flush=True)
            if deadline and time.perf_counter() > deadline and pending:
                raise Failed(f"--timeout {timeout} s passed; ended " + ", ".join(j.name for j in pending))
            time.sleep(0.2)
    finally:  # a failure, the timeout, Ctrl-C or SIGTERM: no worker is left running
        for job in pending:
            if job.proc.poll() is None:
                job.proc.kill()
                job.proc.wait()


def run_dataset(args, name, pairs, ours_cores, logdir):
    """Runs PyG's workers and gat_train for one dataset; returns the raw figures."""
    seeds = list(range(args.first_seed, args.first_seed + args.seeds))
    assignments = [(cores, seeds[i::len(pairs)]) for i, cores in enumerate(pairs)]
    assignments = [(c, s) for c, s in assignments if s]
    exe = os.path.join(args.build, "gat_train")
    ours_cmd = ["taskset", "-c", ",".join(map(str, ours_cores)), exe, "--dataset", name,
                "--data-dir", args.data_dir, "--device", "cpu", "--model", args.model, "--runs", str(len(seeds)),
                "--seed", str(seeds[0]), "--json", "--quiet"]
    if args.max_epochs:
        ours_cmd += ["--epochs", str(args.max_epochs)]
    ours_env = dict(os.environ, OMP_NUM_THREADS=str(len(ours_cores)))

    workers = []
    for i, (cores, worker_seeds) in enumerate(assignments):
        c = ",".join(map(str, cores))
        tag = f"{name}_pyg{i}_cores_{cores[0]}_{cores[1]}"
        result = os.path.join(logdir, f"{tag}.json")
        cmd = [sys.executable, os.path.abspath(__file__), "_worker", "--cores", c, "--dataset", name,
               "--data-dir", args.data_dir, "--seed-list", ",".join(map(str, worker_seeds)),
               "--max-epochs", str(args.max_epochs or 100000), "--model", args.model, "--result", result]
        workers.append((Job(f"{name} PyG cores {c} seeds {worker_seeds}", tag, cmd, logdir), result))
    print(f"{name}: seed(s) {seeds[0]}..{seeds[-1]}, {len(workers)} PyG worker(s) on " + " ".join(
        f"({','.join(map(str, c))})" for c, _ in assignments) + (
        ", ours after them" if args.sequential else ", ours at the same time") +
        f" on ({','.join(map(str, ours_cores))})", flush=True)
    jobs = [w for w, _ in workers]
    if args.sequential:
        wait_all(jobs, args.timeout)
        ours = Job(f"{name} ours", f"{name}_ours", ours_cmd, logdir, ours_env)
        wait_all([ours], args.timeout)
    else:
        ours = Job(f"{name} ours", f"{name}_ours", ours_cmd, logdir, ours_env)
        wait_all(jobs + [ours], args.timeout)
    info = Job(f"{name} ours --info", f"{name}_ours_info",
               ours_cmd[:4] + ["--dataset", name, "--data-dir", args.data_dir, "--info"], logdir)
    wait_all([info], args.timeout)

    pyg_workers = []
    for job, result in workers:
        with open(result) as fh:
            pyg_workers.append({"wall_s": job.seconds, **json.load(fh)})
    try:
        mine = json.loads(ours.stdout().strip().splitlines()[-1])
    except (IndexError, ValueError):
        raise Failed(f"{ours.name}: its last stdout line is not JSON\n{ours.error()}")
    return {"seeds": seeds, "model": args.model, "mode": "sequential" if args.sequential else "concurrent",
            "pyg_workers": pyg_workers,
            "ours_parts": [{"cores": list(ours_cores), "wall_s": ours.seconds, "info_wall_s": info.seconds,
                            "command": ours_cmd, "json": mine}]}


def mean_std(values):
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def summarize(raw):
    """The table's figures from the raw ones (of one invocation, or of several merged)."""
    runs = sorted((r for w in raw["pyg_workers"] for r in w["runs"]), key=lambda r: r["seed"])
    parts = raw["ours_parts"]
    pyg_total = sum(r["seconds"] for r in runs)
    pyg_epochs = sum(r["epochs"] for r in runs)
    acc = mean_std([r["test_acc"] for r in runs])
    ours_wall = sum(p["wall_s"] for p in parts)
    ours_accs = [a for p in parts for a in p["json"]["test_accs"]]
    ours_epochs = [e for p in parts for e in p["json"]["epochs"]]
    ours_steps = [s for p in parts for s in p["json"]["train_step_ms_per_run"]]
    ours_acc = mean_std(ours_accs)
    return {
        "seeds": len(runs), "pyg_runs": runs,
        "pyg": {"total_s": pyg_total, "test_acc_mean": acc[0], "test_acc_std": acc[1],
                "epochs_mean": pyg_epochs / len(runs), "s_per_epoch": pyg_total / pyg_epochs,
                "train_step_ms": statistics.mean(r["train_step_ms"] for r in runs),
                "load_s": max(w["load_s"] for w in raw["pyg_workers"])},
        "ours": {"total_s": ours_wall, "test_acc_mean": ours_acc[0], "test_acc_std": ours_acc[1],
                 "epochs_mean": statistics.mean(ours_epochs), "s_per_epoch": ours_wall / sum(ours_epochs),
                 "train_step_ms": statistics.mean(ours_steps),
                 "load_s": max(p["info_wall_s"] for p in parts)},
        "ratio": pyg_total / ours_wall,
        "versions": f"torch {raw['pyg_workers'][0]['torch']}, "
                    f"torch_geometric {raw['pyg_workers'][0]['torch_geometric']}",
    }


def print_table(name, raw):
    s = summarize(raw)
    p, o = s["pyg"], s["ours"]
    n = s["seeds"]
    print(f"\n{name}: {n} seed(s), 2 cores per process ({raw['mode']}), {s['versions']}")
    model = raw.get("model", "gat")  # files before --model: GAT
    print(f"{'':<34} {'PyG ' + {'gat': 'GAT', 'gatv2': 'GATv2'}[model]:>16} {'ours':>16}")
    print(f"{f'{n}-seed run, 2 cores (s)':<34} {p['total_s']:16.1f} {o['total_s']:16.1f}"
          f"   PyG / ours {s['ratio']:.1f}x")
    acc = lambda m, sd: f"{100 * m:.2f} +- {100 * sd:.2f}"
    print(f"{'test accuracy (%)':<34} {acc(p['test_acc_mean'], p['test_acc_std']):>16} "
          f"{acc(o['test_acc_mean'], o['test_acc_std']):>16}")
    print(f"{'epochs (mean)':<34} {p['epochs_mean']:16.1f} {o['epochs_mean']:16.1f}")
    print(f"{'ms per epoch (step + evaluation)':<34} {1e3 * p['s_per_epoch']:16.2f} {1e3 * o['s_per_epoch']:16.2f}")
    print(f"{'ms per training step (mean)':<34} {p['train_step_ms']:16.2f} {o['train_step_ms']:16.2f}")
    print(f"{'loading (s)':<34} {p['load_s']:16.2f} {o['load_s']:16.2f}"
          "   (PyG's: outside its total; ours: gat_train --info, inside)")
    print("PyG per seed: " + ", ".join(f"{x['seed']}: {x['epochs']} ep {x['seconds']:.1f} s "
                                        f"{100 * x['test_acc']:.1f} %" for x in s["pyg_runs"]))


def machine_info(cores):
    info = {"cpu_count": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as fh:
            info["cpu"] = next(l.split(":", 1)[1].strip() for l in fh if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    siblings = {}
    for c in cores:  # two threads of one physical core would halve a pair
        try:
            with open(f"/sys/devices/system/cpu/cpu{c}/topology/thread_siblings_list") as fh:
                siblings[c] = fh.read().strip()
        except OSError:
            pass
    info["thread_siblings"] = siblings
    return info


def merge(args):
    """Several invocations' cpu_runs.json files as one: runs of the same dataset are pooled."""
    merged = {"merged_from": [], "datasets": {}}
    for path in args.merge:
        with open(path) as fh:
            part = json.load(fh)
        merged["merged_from"].append({"file": path, **{k: part.get(k) for k in ("date", "commit", "machine", "args")}})
        for name, raw in part["datasets"].items():
            into = merged["datasets"].setdefault(name, {"seeds": [], "model": raw.get("model", "gat"),
                                                        "mode": raw["mode"], "pyg_workers": [], "ours_parts": []})
            if into["model"] != raw.get("model", "gat"):
                sys.exit(f"{path}: {name} was run with --model {raw.get('model', 'gat')}, an earlier file "
                         f"with --model {into['model']}")
            clash = set(into["seeds"]) & set(raw["seeds"])
            if clash:
                sys.exit(f"{path}: {name} seeds {sorted(clash)} are in an earlier file too")
            into["seeds"] += raw["seeds"]
            into["pyg_workers"] += raw["pyg_workers"]
            into["ours_parts"] += raw["ours_parts"]
            if into["mode"] != raw["mode"]:
                into["mode"] = "mixed"
    return merged


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        return worker_main(sys.argv[2:])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="folder with gat_train")
    ap.add_argument("--data-dir", default=os.environ.get("GAT_DATA_DIR"), required="GAT_DATA_DIR" not in os.environ,
                    help="the Planetoid raw files (default: $GAT_DATA_DIR)")
    ap.add_argument("--datasets", default="cora,citeseer")
    ap.add_argument("--pairs", type=int, default=5, help="PyG workers at once, on cores (0,1), (2,3), ...")
    ap.add_argument("--seeds", type=int, default=10, help="how many seeds")
    ap.add_argument("--first-seed", type=int, default=0, help="the seeds are FIRST .. FIRST+SEEDS-1")
    ap.add_argument("--max-epochs", type=int, default=0, help="cap on the epochs, both sides (0: none)")
    ap.add_argument("--model", default="gat", choices=["gat", "gatv2"],
                    help="GATConv (gat) or GATv2Conv (gatv2) layers, both sides")
    ap.add_argument("--sequential", action="store_true",
                    help="run ours after PyG on cores 0,1, instead of at the same time on the next pair")
    ap.add_argument("--timeout", type=float, default=0, help="seconds for each batch of processes (0: none)")
    ap.add_argument("--merge", nargs="+", metavar="JSON", help="print and save the pooled table of "
                    "earlier runs' cpu_runs.json files instead of running anything")
    ap.add_argument("--out", default=os.environ.get("OUT", "/tmp/gat_out"))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "cpu_runs.json")
    if args.merge:
        results = merge(args)
        with open(path, "w") as fh:
            json.dump(results, fh, indent=2)
        for name, raw in results["datasets"].items():
            print_table(name, raw)
        print(f"\nwritten: {path}")
        return

    args.data_dir = os.path.abspath(args.data_dir)
    args.build = os.path.abspath(args.build)
    if args.pairs < 1 or args.seeds < 1 or args.first_seed < 0:
        ap.error("--pairs and --seeds must be at least 1, --first-seed at least 0")
    exe = os.path.join(args.build, "gat_train")
    if not os.access(exe, os.X_OK):
        ap.error(f"{exe} is not there: build the project first")
    datasets = [d.strip().lower() for d in args.datasets.split(",") if d.strip()]
    for name in datasets:
        if name not in ("cora", "citeseer"):
            ap.error(f"--datasets: {name}: only cora and citeseer")
        if not os.path.exists(os.path.join(args.data_dir, f"ind.{name}.graph")):
            ap.error(f"{args.data_dir} has no ind.{name}.* files")
    if shutil.which("taskset") is None:
        sys.exit("taskset is not installed (util-linux)")

    pairs = [(2 * i, 2 * i + 1) for i in range(min(args.pairs, args.seeds))]
    ours_cores = pairs[0] if args.sequential else (2 * len(pairs), 2 * len(pairs) + 1)
    allowed = os.sched_getaffinity(0)
    needed = {c for p in pairs for c in p} | set(ours_cores)
    if not needed <= allowed:
        sys.exit(f"needs cores {sorted(needed)} but this process may use {sorted(allowed)}: "
                 "lower --pairs or add --sequential")

    if allowed - needed:  # keep this process's polling off the measured cores
        os.sched_setaffinity(0, allowed - needed)
    # SIGTERM (a time limit's) unwinds like Ctrl-C, so that wait_all ends the workers.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(f"cpu_runs.py: signal {signum}"))
    logdir = tempfile.mkdtemp(prefix="cpu_runs_logs_")  # each process's stdout and stderr
    results = {"date": time.strftime("%Y-%m-%d %H:%M"), "commit": os.environ.get("GAT_COMMIT", "unknown"),
               "machine": machine_info(sorted(needed)), "args": vars(args), "datasets": {}}
    for name in datasets:
        try:
            results["datasets"][name] = run_dataset(args, name, pairs, ours_cores, logdir)
        except Failed as exc:
            print(exc, file=sys.stderr)
            sys.exit(f"cpu_runs.py: {name} failed; every process's output is in {logdir}")
        with open(path, "w") as fh:
            json.dump(results, fh, indent=2)
        print_table(name, results["datasets"][name])
    shutil.rmtree(logdir, ignore_errors=True)
    print(f"\nwritten: {path}")


if __name__ == "__main__":
    main()
