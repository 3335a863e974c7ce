#!/usr/bin/env python3
"""A compiler launcher that shares object files between the mutation runner's tree copies.

mutate.py uses ccache where it is installed; elsewhere (a bare GPU machine) it configures its
copies with this launcher instead, so that building copies 2..N of the unmutated tree costs file
copies, not compilations. The key of an object is the compile command, with the copy's root
replaced by a placeholder, and a digest of every source file of the copy (its build directory
left out): a copy holding a mutant never shares its objects with another state of the tree, and a
restored file is found again. The depfile is stored with the placeholder and written back with
the copy's root.

  compile_cache.py COMPILER ARGS...     (CMAKE_<LANG>_COMPILER_LAUNCHER)
  environment: GAT_MUTATION_ROOT (the copy), GAT_MUTATION_CACHE (the cache directory)
"""
import hashlib
import os
import shutil
import subprocess
import sys

PLACEHOLDER = "@GAT_MUTATION_ROOT@"


def tree_digest(root):
    h = hashlib.sha256()
    for directory, subdirs, files in os.walk(root):
        if directory == root:
            subdirs[:] = [d for d in subdirs if d not in ("build", ".git")]
        subdirs.sort()
        for name in sorted(files):
            path = os.path.join(directory, name)
            if os.path.islink(path):
                continue
            h.update(os.path.relpath(path, root).encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.sha256(f.read()).digest())
    return h.hexdigest()


def argument_after(args, flag):
    for k, a in enumerate(args[:-1]):
        if a == flag:
            return args[k + 1]
    return None


def main():
    command = sys.argv[1:]
    root, cache = os.environ.get("GAT_MUTATION_ROOT"), os.environ.get("GAT_MUTATION_CACHE")
    output, depfile = argument_after(command, "-o"), argument_after(command, "-MF")
    if not root or not cache or not output or "-c" not in command:
        os.execvp(command[0], command)
    root = os.path.abspath(root)
    normalised = "\0".join(a.replace(root, PLACEHOLDER) for a in command)
    key = hashlib.sha256((normalised + "\0" + tree_digest(root)).encode()).hexdigest()
    entry = os.path.join(cache, key[:2], key)
    if os.path.isfile(entry + ".o"):
        shutil.copyfile(entry + ".o", output)
        if depfile and os.path.isfile(entry + ".d"):
            with open(entry + ".d") as f, open(depfile, "w") as out:
                out.write(f.read().replace(PLACEHOLDER, root))
        return 0
    rc = subprocess.call(command)
    if rc == 0:
        os.makedirs(os.path.dirname(entry), exist_ok=True)
        tmp = f"{entry}.{os.getpid()}"
        shutil.copyfile(output, tmp + ".o")
        if depfile and os.path.isfile(depfile):
            with open(depfile) as f, open(tmp + ".d", "w") as out:
                out.write(f.read().replace(root, PLACEHOLDER))
            os.replace(tmp + ".d", entry + ".d")
        os.replace(tmp + ".o", entry + ".o")  # last: an entry with its object is complete
    return rc


if __name__ == "__main__":
    sys.exit(main())
