//! The disk limit's walk ([`hevo_runtime::disk::usage`]) on trees of several shapes, against
//! two baselines in the same run: a plain recursive `std::fs::read_dir` + `symlink_metadata`
//! walk summing `blocks() * 512` (what `du` adds up), and starting a trivial process
//! (`true`), which every launch costs at least.
//!
//! Why: with a disk limit (the default, 10240 MB) every launch is walked when it starts, about
//! every 250 ms while it runs, and once more when it ends. The end-of-launch walk adds to
//! every trial's latency; the watch takes CPU from the trials running beside it.
//!
//! Each round builds nothing new: the trees are built once (warm page and dentry caches, as a
//! trial's folder is when hevo walks it) and every round times, per shape, the two walks
//! interleaved, then the spawn. A round's figure is the median of its repetitions; the
//! summary is the median of the rounds.
//!
//! Run: `cargo bench -p hevo-runtime --bench disk_walk` (`HEVO_BENCH_ROUNDS`, default 5;
//! `HEVO_BENCH_BIG=1` adds a 100,000-file tree; `HEVO_BENCH_DIR` for where the trees go,
//! default the system temporary folder).

use std::ffi::OsStr;
use std::fs::File;
use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hevo_runtime::disk::{self, Usage, MIN_INTERVAL};

/// About how long one measurement of one shape takes in a round.
const BUDGET: Duration = Duration::from_millis(300);

fn median(xs: &mut [f64]) -> f64 {
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The baseline: what `du` adds up, the plain way (a path per entry, recursion).
fn std_walk(dir: &Path) -> u64 {
    let mut bytes = 0;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        bytes += meta.blocks() * 512;
        if meta.is_dir() {
            bytes += std_walk(&path);
        }
    }
    bytes
}

fn spawn_true() {
    let status = Command::new("true").status().unwrap();
    assert!(status.success());
}

fn write(path: &Path, bytes: usize) {
    File::create(path)
        .unwrap()
        .write_all(&vec![b'x'; bytes])
        .unwrap();
}

struct Shape {
    name: &'static str,
    /// Files and folders below the root.
    entries: usize,
    root: PathBuf,
}

/// Builds every shape under `base`.
fn build(base: &Path, big: bool) -> Vec<Shape> {
    let mut shapes = Vec::new();
    let mut add = |name: &'static str, entries: usize, f: &dyn Fn(&Path)| {
        let root = base.join(name);
        std::fs::create_dir(&root).unwrap();
        f(&root);
        shapes.push(Shape {
            name,
            entries,
            root,
        });
    };
    add("empty folder", 0, &|_| {});
    add("100 files of 1 KB", 100, &|r| {
        for i in 0..100 {
            write(&r.join(format!("f{i}")), 1024);
        }
    });
    let spread = |n_dirs: usize, per_dir: usize| {
        move |r: &Path| {
            for d in 0..n_dirs {
                let dir = r.join(format!("d{d}"));
                std::fs::create_dir(&dir).unwrap();
                for i in 0..per_dir {
                    write(&dir.join(format!("f{i}")), 100);
                }
            }
        }
    };
    add(
        "10,000 files of 100 B in 100 folders",
        10_100,
        &spread(100, 100),
    );
    if big {
        add(
            "100,000 files of 100 B in 1,000 folders",
            101_000,
            &spread(1000, 100),
        );
    }
    let chain = |depth: usize| {
        move |r: &Path| {
            let mut p = r.to_path_buf();
            for _ in 0..depth {
                p.push("d");
            }
            std::fs::create_dir_all(&p).unwrap();
        }
    };
    // As many folders as the chain below, side by side: what a folder costs, depth apart.
    add("1,000 empty folders side by side", 1000, &spread(1000, 0));
    add("a chain of 999 folders", 999, &chain(999));
    add("a chain of 1,000 folders", 1000, &chain(1000));
    add("one 200 MB sparse file", 1, &|r| {
        File::create(r.join("sparse"))
            .unwrap()
            .set_len(200 << 20)
            .unwrap();
    });
    add("one 200 MB written file", 1, &|r| {
        let mut f = File::create(r.join("real")).unwrap();
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..200 {
            f.write_all(&chunk).unwrap();
        }
        f.sync_all().unwrap();
    });
    shapes
}

/// How many repetitions fit in [`BUDGET`], given one took `once`.
fn reps(once: Duration) -> usize {
    ((BUDGET.as_secs_f64() / once.as_secs_f64().max(1e-6)) as usize).clamp(5, 2000)
}

/// One round of one shape: medians (ms) of `disk::usage` and of the std walk, interleaved.
fn time_shape(shape: &Shape) -> (f64, f64, Usage, u64) {
    let dirs = vec![shape.root.clone()];
    let start = Instant::now();
    let u = disk::usage(&dirs);
    let n = reps(start.elapsed());
    let std_bytes = std_walk(&shape.root);
    let (mut a, mut b) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let t = Instant::now();
        std::hint::black_box(disk::usage(std::hint::black_box(&dirs)));
        a.push(ms(t.elapsed()));
        let t = Instant::now();
        std::hint::black_box(std_walk(std::hint::black_box(&shape.root)));
        b.push(ms(t.elapsed()));
    }
    (median(&mut a), median(&mut b), u, std_bytes)
}

fn time_spawn() -> f64 {
    let start = Instant::now();
    spawn_true();
    let n = reps(start.elapsed()).min(200);
    let mut xs: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            spawn_true();
            ms(t.elapsed())
        })
        .collect();
    median(&mut xs)
}

/// The share of one core the watch takes on a tree one walk of which takes `walk_ms`: it
/// sleeps [`MIN_INTERVAL`] or twenty times the walk, whichever is longer.
fn watch_share(walk_ms: f64) -> f64 {
    let sleep = (ms(MIN_INTERVAL)).max(20.0 * walk_ms);
    walk_ms / (walk_ms + sleep)
}

fn main() {
    let rounds: usize = std::env::var("HEVO_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5);
    let big = std::env::var_os("HEVO_BENCH_BIG").is_some_and(|v| v != OsStr::new("0"));
    let base = match std::env::var_os("HEVO_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d).unwrap(),
        None => tempfile::tempdir().unwrap(),
    };
    let t = Instant::now();
    let shapes = build(base.path(), big);
    println!(
        "trees built in {:.1} s under {}; {rounds} rounds, each measurement about {} ms",
        t.elapsed().as_secs_f64(),
        base.path().display(),
        BUDGET.as_millis()
    );

    // Per shape: the round medians of usage and of the std walk; per round: the spawn.
    let mut usage_ms = vec![Vec::new(); shapes.len()];
    let mut std_ms = vec![Vec::new(); shapes.len()];
    let mut spawn_ms = Vec::new();
    let mut seen: Vec<Option<(Usage, u64)>> = vec![None; shapes.len()];
    println!();
    println!("| round | shape | usage ms | std walk ms | spawn ms | usage / std | usage / spawn |");
    println!("|---|---|---|---|---|---|---|");
    for round in 1..=rounds {
        let spawn = time_spawn();
        spawn_ms.push(spawn);
        for (i, shape) in shapes.iter().enumerate() {
            let (u, s, got, std_bytes) = time_shape(shape);
            usage_ms[i].push(u);
            std_ms[i].push(s);
            seen[i] = Some((got, std_bytes));
            println!(
                "| {round} | {} | {u:.4} | {s:.4} | {spawn:.3} | {:.2} | {:.4} |",
                shape.name,
                u / s,
                u / spawn
            );
        }
    }

    let spawn = median(&mut spawn_ms);
    println!();
    println!("medians of the {rounds} rounds; spawning `true`: {spawn:.3} ms");
    println!();
    println!(
        "| shape | entries | usage bytes | std walk bytes | too deep | usage ms | std walk ms | usage / std | usage / spawn | watch share of a core |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let mut per_entry = None;
    for (i, shape) in shapes.iter().enumerate() {
        let u = median(&mut usage_ms[i]);
        let s = median(&mut std_ms[i]);
        let (got, std_bytes) = seen[i].unwrap();
        if shape.entries == 10_100 {
            per_entry = Some(u / shape.entries as f64);
        }
        println!(
            "| {} | {} | {} | {} | {} | {u:.4} | {s:.4} | {:.2} | {:.4} | {:.3}% |",
            shape.name,
            shape.entries,
            got.bytes,
            std_bytes,
            got.too_deep,
            u / s,
            u / spawn,
            100.0 * watch_share(u),
        );
    }
    if let Some(per_entry) = per_entry {
        println!();
        println!(
            "usage per entry (10,000-file tree): {:.3} us; the watch takes 1% of a core at about \
             {:.0} entries ({:.2} ms a walk), 4.8% (its cap: sleeps 20x the walk) from about {:.0} \
             entries ({:.1} ms a walk)",
            per_entry * 1e3,
            2.525 / per_entry,
            2.525,
            12.5 / per_entry,
            12.5
        );
    }
}
