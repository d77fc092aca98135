"""Helpers of scripts/gpu/carry.sh (the GPU session kit), each a subcommand, standard library only.

    kit.py pick REPORT.json IMAGE_LIST         names==versions of a pip resolve report that the image lacks
    kit.py closure WHEEL_DIR IMAGE_LIST        every Requires-Dist of a carried wheel is carried or in the image
    kit.py manifest CARRY_DIR REPO LIMIT_MIB   write CARRY_DIR/manifest.txt; exit 1 when carry + repo > limit

The wheels are for the GPU machines' python3 (CPython 3.12 on Linux x86-64), so markers are
evaluated for that interpreter, not this one.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import zipfile
from pathlib import Path

MIB = 1024 * 1024

# the GPU machines' interpreter, for environment markers (python_version < "3.13" ...)
TARGET_ENV = {
    "python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
    "platform_python_implementation": "CPython", "sys_platform": "linux", "os_name": "posix",
    "platform_system": "Linux", "platform_machine": "x86_64", "implementation_version": "3.12.3",
    "platform_release": "", "platform_version": "", "extra": "",
}


def normalize(name: str) -> str:
    """PEP 503 name: lower case, runs of -_. as one '-'."""
    return re.sub(r"[-_.]+", "-", name).lower()


def image_packages(path: str | Path) -> set[str]:
    """The image's distributions (one name a line, # comments), normalized."""
    names = set()
    for line in Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            names.add(normalize(line))
    return names


def pick(report: str | Path, image_list: str | Path) -> list[str]:
    """``name==version`` of every distribution in a ``pip install --report`` that the image lacks."""
    have = image_packages(image_list)
    data = json.loads(Path(report).read_text())
    out = []
    for item in data.get("install", []):
        meta = item["metadata"]
        if normalize(meta["name"]) not in have:
            out.append(f"{meta['name']}=={meta['version']}")
    return sorted(out, key=str.lower)


def _requirement(spec: str):
    from pip._vendor.packaging.requirements import Requirement  # pip's own copy: no install needed

    return Requirement(spec)


def wheel_requires(wheel: Path) -> tuple[str, list[str]]:
    """(normalized name, the names it needs on CPython 3.12 Linux with no extras) of one wheel."""
    with zipfile.ZipFile(wheel) as zf:
        meta_name = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta_name).decode("utf-8", "replace")
    name = ""
    needs = []
    for line in text.splitlines():
        if not line.strip():
            break  # the headers end at the first blank line; the long description follows
        if line.startswith("Name:"):
            name = normalize(line.split(":", 1)[1].strip())
        elif line.startswith("Requires-Dist:"):
            req = _requirement(line.split(":", 1)[1].strip())
            if req.marker is None or req.marker.evaluate(dict(TARGET_ENV)):
                needs.append(normalize(req.name))
    return name, needs


def closure(wheel_dir: str | Path, image_list: str | Path) -> list[str]:
    """Problems: a requirement of a carried wheel that is neither carried nor in the image, or
    two wheels of one distribution (pip refuses to install both)."""
    have = image_packages(image_list)
    carried: dict[str, list[str]] = {}
    problems = []
    wheels = sorted(Path(wheel_dir).glob("*.whl"))
    for whl in wheels:
        name, needs = wheel_requires(whl)
        if name in carried:
            problems.append(f"two wheels of {name}: keep one ({whl.name})")
        carried[name] = needs
    for name, needs in carried.items():
        for need in needs:
            if need not in carried and need not in have:
                problems.append(f"{name} needs {need}: neither carried nor in the image")
    return problems


def tracked_bytes(repo: str | Path) -> int:
    """Bytes of the repo's tracked files as they are in the working tree (what a run copies)."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z"], check=True, capture_output=True).stdout
    total = 0
    for rel in out.decode().split("\0"):
        p = Path(repo) / rel
        if rel and p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total


def manifest(carry_dir: str | Path, repo_bytes: int, limit_mib: float) -> tuple[str, bool]:
    """(manifest text, within the limit) for every file under ``carry_dir`` plus the repo."""
    carry = Path(carry_dir)
    groups: dict[str, list[tuple[str, int]]] = {}
    for p in sorted(carry.rglob("*")):
        if p.is_file() and p.name != "manifest.txt":
            rel = p.relative_to(carry)
            group = rel.parts[0] if len(rel.parts) > 1 else "."
            groups.setdefault(group, []).append((str(rel), p.stat().st_size))
    lines = [f"# {carry.name}: what scripts/gpu/session.sh uses on the GPU machine (sizes in bytes)"]
    total = 0
    for group, files in groups.items():
        size = sum(s for _, s in files)
        total += size
        lines.append(f"## {group}: {len(files)} files, {size / MIB:.2f} MiB")
        lines += [f"{s:>10}  {rel}" for rel, s in files]
    whole = total + repo_bytes
    ok = whole <= limit_mib * MIB
    lines.append(f"carried {total / MIB:.2f} MiB + repo's tracked files {repo_bytes / MIB:.2f} MiB = "
                 f"{whole / MIB:.2f} MiB (limit {limit_mib:g} MiB{'' if ok else ': OVER'})")
    return "\n".join(lines) + "\n", ok


def main(argv: list[str]) -> int:
    if len(argv) == 3 and argv[0] == "pick":
        print("\n".join(pick(argv[1], argv[2])))
        return 0
    if len(argv) == 3 and argv[0] == "closure":
        problems = closure(argv[1], argv[2])
        for p in problems:
            print(f"closure: {p}", file=sys.stderr)
        return 1 if problems else 0
    if len(argv) == 4 and argv[0] == "manifest":
        text, ok = manifest(argv[1], tracked_bytes(argv[2]), float(argv[3]))
        Path(argv[1], "manifest.txt").write_text(text)
        print(text.splitlines()[-1])
        if not ok:
            print(f"carry.sh: too big for one device run: over {argv[3]} MiB "
                  f"(leave out a group, or vl-convert-python)", file=sys.stderr)
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
