#!/usr/bin/env python3
"""Runs every area script of this folder in a folder of a local disk and in a folder of a
mount, and compares their outputs step by step. Differences listed in `known-differences`
(features not built yet, each with its reason) are reported, not failed; any other
difference fails, and so does a listed one that no longer differs (take it off the list).

Usage: compare.py NATIVE_FOLDER MOUNT_FOLDER [AREA...]
Prints each difference, then "N steps match, K known differences, F unexpected"."""
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def outcomes(script, folder):
    folder.mkdir(parents=True)
    run = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True,
                         timeout=300, env={**os.environ, "PYTHONPATH": str(HERE)})
    if run.returncode != 0:
        return {"(the script)": f"exit {run.returncode}: {run.stderr.strip()[-300:]}"}
    steps = {}
    for line in run.stdout.splitlines():
        label, _, result = line.partition(": ")
        if label in steps:  # labels are keys: one step must not hide another
            return {"(the script)": f"the step label {label!r} is used twice (or holds ': ')"}
        steps[label] = result
    return steps


def known_differences():
    known = {}
    for line in (HERE / "known-differences").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            step, _, why = line.partition("  # ")
            known[step.strip()] = why.strip()
    return known


def main():
    native, mount, *areas = sys.argv[1:]
    scripts = [HERE / f"{area}.py" for area in areas] or sorted(
        p for p in HERE.glob("*.py") if p.name not in ("harness.py", "compare.py"))
    known = known_differences()
    matched = expected = 0
    unexpected = []
    for script in scripts:
        area = script.stem
        on_disk = outcomes(script, Path(native) / area)
        on_mount = outcomes(script, Path(mount) / area)
        if "(the script)" in on_disk:  # a script that fails on the local disk tests nothing
            unexpected.append(f"{area}: the script fails on the local disk: {on_disk['(the script)']}")
            continue
        for label in list(on_disk) + [label for label in on_mount if label not in on_disk]:
            name = f"{area}: {label}"
            disk, fs = on_disk.get(label, "(missing)"), on_mount.get(label, "(missing)")
            if disk == fs:
                matched += 1
                if name in known:
                    unexpected.append(f"{name}: now matches ({fs}); take it off known-differences")
            elif name in known:
                expected += 1
                print(f"known   {name}: local disk {disk}, mount {fs} ({known[name]})")
            else:
                unexpected.append(f"{name}: local disk {disk}, mount {fs}")
    for line in unexpected:
        print(f"DIFFERS {line}")
    print(f"{matched} steps match, {expected} known differences, {len(unexpected)} unexpected")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main())
