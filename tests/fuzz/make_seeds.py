#!/usr/bin/env python3
"""Seed corpora for csv_fuzz and cli_fuzz (see tests/fuzz/CMakeLists.txt).

    tests/fuzz/make_seeds.py OUT_DIR    writes OUT_DIR/csv/* and OUT_DIR/cli/*
"""
import os
import sys

out = sys.argv[1]
os.makedirs(os.path.join(out, "csv"), exist_ok=True)
os.makedirs(os.path.join(out, "cli"), exist_ok=True)

feat = "".join(f"{i % 3}.5,{i % 2},-1\n" for i in range(12))
label = "".join(f"{i % 2}\n" for i in range(12))
edge = "".join(f"{i},{(i + 1) % 12}\n" for i in range(12))
files = [feat, label, edge, "0\n1\n2\n3\n", "4\n5\n6\n7\n", "8\n9\n10\n11\n"]
body = "\n--\n".join(files).encode()
for gz in (0, 0b000001, 0b000100, 0b111111):  # bit k: file k gzip-compressed
    with open(os.path.join(out, "csv", f"ring_gz{gz:02x}"), "wb") as f:
        f.write(bytes([gz]) + body)

args = [
    ["--dataset", "cora", "--epochs", "5", "--hidden", "8", "--heads", "8"],
    ["--lr", "0.01", "--weight-decay", "5e-4", "--dropout", "0.6", "--value-dropout", "0"],
    ["--seed", "3", "--runs", "10", "--json", "--quiet", "--save", "x.safetensors"],
    ["--load", "x.safetensors", "--dataset", "citeseer", "--device", "cpu", "--sparse-below", "0.5"],
    ["--no-cuda-graphs", "--patience", "100", "--output-heads", "8", "--log", "l.jsonl", "--info"],
]
for i, a in enumerate(args):
    with open(os.path.join(out, "cli", f"args{i}"), "wb") as f:
        f.write(b"\0".join(s.encode() for s in a))
