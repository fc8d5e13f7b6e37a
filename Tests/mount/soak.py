#!/usr/bin/env python3
"""Randomized soak: several mounted devices of one container do random operations for a
fixed time; then everything settles and the trees must be identical, with no written version
lost. Usage: soak.py SEED SECONDS ICLOUDFS MOUNT...  (prints the seed on failure)."""
import hashlib, os, random, subprocess, sys, time

seed, seconds, icloudfs, mounts = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3], sys.argv[4:]
# Every operation, for tracing a failure: time, device, what, path, what was read/written.
trace = open(os.environ.get("ICLOUDFS_SOAK_TRACE", os.devnull), "w", buffering=1)


def log(root, what, path, detail=""):
    trace.write(f"{time.time():.3f} {os.path.basename(root)} {what} {os.path.relpath(path, root)} {detail}\n")
rng = random.Random(seed)
written, replaced_while_seen = set(), set()
names = ["a.txt", "b.txt", "notes", "x"]
counter = 0


def entries(root):
    found = []
    for folder, dirs, files in os.walk(root):
        rel = os.path.relpath(folder, root)
        for d in dirs:
            found.append((os.path.normpath(os.path.join(rel, d)), True))
        for f in files:
            found.append((os.path.normpath(os.path.join(rel, f)), False))
    return found


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def step(root):
    global counter
    counter += 1
    items = entries(root)
    folders = ["."] + [p for p, d in items if d]
    files = [p for p, d in items if not d]
    choice = rng.randrange(10)
    try:
        if choice < 3:
            path = os.path.join(root, rng.choice(folders), rng.choice(names))
            if os.path.exists(path):
                return
            token = f"s{seed}-{counter}"
            with open(path, "x") as f:  # only a file this step created counts as created
                f.write(token)
            written.add(token)
            log(root, "create", path, token)
        elif choice == 3:
            os.mkdir(os.path.join(root, rng.choice(folders), rng.choice(["dir", "Docs"])))
        elif choice < 7 and files:
            # An editor's save: read and rewrite through one open file.
            path = os.path.join(root, rng.choice(files))
            token = f"s{seed}-{counter}"
            with open(path, "r+") as f:
                seen = f.read()
                replaced_while_seen.add(seen)
                f.seek(0)
                f.truncate()
                f.write(token)
            written.add(token)
            log(root, "edit", path, f"{seen} -> {token}")
        elif choice == 7 and items:
            source, is_dir = rng.choice(items)
            target_folder = rng.choice(folders)
            if is_dir and (target_folder + "/").startswith(source + "/"):
                return
            target = os.path.join(root, target_folder, rng.choice(names))
            old = None
            if os.path.isfile(target) and not is_dir:
                # Replace only the file that was read, while it is open: a name can move to
                # another file meanwhile (another device's change), as on any shared
                # filesystem; a version that arrives after the read is kept (edit beats delete).
                with open(target) as f:
                    old = f.read()
                    replaced_while_seen.add(old)
                    if os.stat(target).st_ino != os.fstat(f.fileno()).st_ino:
                        return
                    os.rename(os.path.join(root, source), target)
            else:
                os.rename(os.path.join(root, source), target)
            log(root, "rename", os.path.join(root, source), f"-> {os.path.relpath(target, root)} over {old or ''}")
        elif choice == 8 and files:
            # Read, then delete while still open (what the reader saw is what is deleted).
            path = os.path.join(root, rng.choice(files))
            with open(path) as f:
                seen = f.read()
                replaced_while_seen.add(seen)
                if os.stat(path).st_ino != os.fstat(f.fileno()).st_ino:
                    return  # the name moved to another file meanwhile
                os.unlink(path)
            log(root, "delete", path, seen)
        elif folders[1:]:
            os.rmdir(os.path.join(root, rng.choice(folders[1:])))
    except OSError:
        pass  # refusals (not empty, exists, a name that moved meanwhile) are part of the game


def listing(root):
    result = []
    for path, is_dir in sorted(entries(root)):
        if is_dir:
            result.append(path + "/")
        else:
            with open(os.path.join(root, path), "rb") as f:
                result.append(path + " " + hashlib.sha256(f.read()).hexdigest()[:12])
    return result


end = time.time() + seconds
operations = 0
while time.time() < end:
    step(rng.choice(mounts))
    operations += 1

for _ in range(3):
    for m in mounts:
        subprocess.run([icloudfs, "sync", "--wait", "--timeout", "60s", m], check=True)
deadline = time.time() + 30
while time.time() < deadline:
    listings = [listing(m) for m in mounts]
    if all(l == listings[0] for l in listings):
        break
    time.sleep(0.2)
else:
    print(f"seed {seed}: devices differ after settling")
    for m, l in zip(mounts, listings):
        print(m, l)
    sys.exit(1)

present = set()
for path, is_dir in entries(mounts[0]):
    if not is_dir:
        present.add(read(os.path.join(mounts[0], path)))
lost = written - replaced_while_seen - present
conflicts = sum("conflicted copy" in p for p, _ in entries(mounts[0]))
print(f"measured: soak seed {seed}: {operations} operations on {len(mounts)} devices, "
      f"{len(listings[0])} entries, {conflicts} conflict copies, {len(lost)} lost")
if lost:
    print(f"seed {seed}: lost {sorted(lost)}")
    # What happened to each lost version (the whole trace is in ICLOUDFS_SOAK_TRACE).
    trace.flush()
    if trace.name != os.devnull:
        with open(trace.name) as f:
            for line in f:
                if any(token in line.split() for token in lost):
                    print("  " + line.rstrip())
    sys.exit(1)
