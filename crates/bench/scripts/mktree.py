#!/usr/bin/env python3
"""Make a reproducible synthetic workspace for benchmarks.

usage: mktree.py ROOT [--dirs 1000] [--files-per-dir 100] [--min 1024] [--max 8192]
                      [--kind binary|text] [--seed 42] [--big-file-mib 0]

Default: 1000 dirs x 100 files of 1-8 KiB random bytes (about 100,000 files, 460 MB).
--kind text writes source-like text (compressible). --big-file-mib N adds big.bin of N MiB.

Origin: a copy of the project's shared benchmark script (shared/bench/mktree.py,
outside this repository), kept here so the benchmark runs from a fresh clone; the same seed
makes the same tree. Only this paragraph was added.
"""
import argparse, os, random

p = argparse.ArgumentParser()
p.add_argument("root")
p.add_argument("--dirs", type=int, default=1000)
p.add_argument("--files-per-dir", type=int, default=100)
p.add_argument("--min", type=int, default=1024)
p.add_argument("--max", type=int, default=8192)
p.add_argument("--kind", choices=["binary", "text"], default="binary")
p.add_argument("--seed", type=int, default=42)
p.add_argument("--big-file-mib", type=int, default=0)
a = p.parse_args()

rng = random.Random(a.seed)
words = [("w%d" % i).encode() for i in range(5000)]
total = 0
for d in range(a.dirs):
    dp = os.path.join(a.root, "d%04d" % d)
    os.makedirs(dp, exist_ok=True)
    for f in range(a.files_per_dir):
        n = rng.randint(a.min, a.max)
        if a.kind == "binary":
            data = rng.randbytes(n)
            name = "f%03d.bin" % f
        else:
            out = bytearray()
            while len(out) < n:
                out += b" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))) + b";\n"
            data = bytes(out[:n])
            name = "f%03d.rs" % f
        with open(os.path.join(dp, name), "wb") as fh:
            fh.write(data)
        total += n
if a.big_file_mib:
    with open(os.path.join(a.root, "big.bin"), "wb") as fh:
        for _ in range(a.big_file_mib):
            fh.write(rng.randbytes(1 << 20))
    total += a.big_file_mib << 20
print("files", a.dirs * a.files_per_dir + (1 if a.big_file_mib else 0), "bytes", total)
