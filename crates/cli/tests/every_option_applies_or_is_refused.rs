//! Every option of every `proxima` subcommand does something or is refused:
//! the test walks the command line's definition (`proxima_cli::Cli`), and each
//! option must have at least one probe below, which runs the real binary:
//! - `Differs`: two invocations that differ only in the option (or its value)
//!   both succeed and print different things, while the first one, run twice,
//!   prints the same (so the difference is the option's doing);
//! - `Refused`: where the option would do nothing, the command exits 2 naming it;
//! - `ServeDiffers`: `proxima serve` announces different settings;
//! - `Enables`: without the option the command fails, with it it succeeds.
//!
//! For `reproduce`, each experiment is a subcommand with its own options;
//! every experiment must take or refuse each of `--scale`, `--count` and
//! `--jobs`. A new option without a probe fails the test.
//!
//! In the arguments, `{vol}` is a volume directory in a fresh temporary
//! directory `{tmp}`, `{models}` the disk models shipped in the repository,
//! `{traces}` the trace samples, `{sweeps}` the sweep specifications of the
//! tests, and `{port}` a free TCP port; outputs are
//! compared with `{tmp}` masked.

use crate::service_support;

use std::collections::{BTreeSet, HashMap};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};

use clap::CommandFactory;
use service_support::proxima;

type Words = &'static [&'static str];

enum Probe {
    Differs {
        setup: &'static [Words],
        first: Words,
        second: Words,
        compare: Compare,
    },
    Refused {
        setup: &'static [Words],
        args: Words,
    },
    ServeDiffers {
        first: Words,
        second: Words,
    },
    /// Without the option the command fails; with it, it succeeds.
    Enables {
        setup: &'static [Words],
        without: Words,
        with: Words,
    },
}

/// What of the output is compared.
#[derive(Clone, Copy, Debug)]
enum Compare {
    /// Standard output and error (but the lines that report wall time, which
    /// start with `wall `), and the names of the files in `{tmp}`.
    Output,
    /// What follows `marker` on each line that has it (to leave out wall-clock figures).
    After(&'static str),
}

/// A small volume with an extent `lun0` (4 MiB) and a snapshot `s1`.
const VOLUME: &[Words] = &[
    &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
    &["extent", "create", "{vol}", "lun0", "--size", "4M"],
    &["snapshot", "create", "{vol}", "s1"],
];
/// [`VOLUME`] with `lun0` grown to 40 MiB: a clone of it would commit more
/// than the 64 MiB data device.
const VOLUME_WITH_A_LARGE_EXTENT: &[Words] = &[
    &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
    &["extent", "create", "{vol}", "lun0", "--size", "40M"],
];
const NO_SETUP: &[Words] = &[];
const STRANDS: Words = &["disk", "strands", "--count", "20"];

fn differs(first: Words, second: Words) -> Probe {
    Probe::Differs { setup: NO_SETUP, first, second, compare: Compare::Output }
}

fn differs_on_volume(first: Words, second: Words) -> Probe {
    Probe::Differs { setup: VOLUME, first, second, compare: Compare::Output }
}

fn refused(args: Words) -> Probe {
    Probe::Refused { setup: NO_SETUP, args }
}

/// The probes, by subcommand and option.
fn probes() -> Vec<(&'static str, &'static str, Probe)> {
    vec![
        // disk validate
        (
            "disk validate",
            "--parv",
            differs(
                &["disk", "validate", "--parv", "cheetah15k5", "--trace", "{models}/atlas10k/atlas10k.trace"],
                &["disk", "validate", "--parv", "atlas10k", "--trace", "{models}/atlas10k/atlas10k.trace"],
            ),
        ),
        (
            "disk validate",
            "--trace",
            differs(
                &["disk", "validate", "--parv", "cheetah15k5", "--trace", "{models}/cheetah15k5/random.trace"],
                &["disk", "validate", "--parv", "cheetah15k5", "--trace", "{models}/atlas10k/atlas10k.trace"],
            ),
        ),
        (
            "disk validate",
            "--set",
            differs(
                &["disk", "validate", "--parv", "cheetah15k5", "--trace", "{models}/cheetah15k5/random.trace"],
                &[
                    "disk",
                    "validate",
                    "--parv",
                    "cheetah15k5",
                    "--trace",
                    "{models}/cheetah15k5/random.trace",
                    "--set",
                    "disk0:Read completion overhead=2.0",
                ],
            ),
        ),
        (
            "disk validate",
            "--per-request",
            differs(
                &["disk", "validate", "--parv", "cheetah15k5", "--trace", "{models}/cheetah15k5/random.trace"],
                &[
                    "disk",
                    "validate",
                    "--parv",
                    "cheetah15k5",
                    "--trace",
                    "{models}/cheetah15k5/random.trace",
                    "--per-request",
                    "{tmp}/requests.csv",
                ],
            ),
        ),
        (
            "disk validate",
            "--seed",
            differs(
                &["disk", "validate", "--parv", "cheetah15k5", "--trace", "{models}/cheetah15k5/random.trace"],
                &[
                    "disk",
                    "validate",
                    "--parv",
                    "cheetah15k5",
                    "--trace",
                    "{models}/cheetah15k5/random.trace",
                    "--seed",
                    "7",
                ],
            ),
        ),
        ("disk validate-all", "--seed", differs(&["disk", "validate-all"], &["disk", "validate-all", "--seed", "7"])),
        // disk bench: only the simulated figures are compared (the rest is wall time).
        ("disk bench", "--model", bench(&["--model", "atlas10k"])),
        ("disk bench", "--set", bench(&["--set", "disk0:Read completion overhead=2.0"])),
        ("disk bench", "--requests", bench(&["--requests", "1500"])),
        ("disk bench", "--seed", bench(&["--seed", "9"])),
        // disk strands
        ("disk strands", "--model", differs(STRANDS, &["disk", "strands", "--count", "20", "--model", "atlas10k"])),
        (
            "disk strands",
            "--set",
            differs(STRANDS, &["disk", "strands", "--count", "20", "--set", "disk0:Read completion overhead=2.0"]),
        ),
        ("disk strands", "--span", differs(STRANDS, &["disk", "strands", "--count", "20", "--span", "1024"])),
        (
            "disk strands",
            "--span",
            refused(&["disk", "strands", "--count", "20", "--pattern", "semi-sequential", "--span", "1024"]),
        ),
        ("disk strands", "--strand", differs(STRANDS, &["disk", "strands", "--count", "20", "--strand", "4"])),
        ("disk strands", "--count", differs(STRANDS, &["disk", "strands", "--count", "21"])),
        ("disk strands", "--op", differs(STRANDS, &["disk", "strands", "--count", "20", "--op", "write"])),
        (
            "disk strands",
            "--queue-depth",
            differs(STRANDS, &["disk", "strands", "--count", "20", "--queue-depth", "1"]),
        ),
        ("disk strands", "--order", differs(STRANDS, &["disk", "strands", "--count", "20", "--order", "random"])),
        (
            "disk strands",
            "--pattern",
            differs(STRANDS, &["disk", "strands", "--count", "20", "--pattern", "semi-sequential"]),
        ),
        ("disk strands", "--start", differs(STRANDS, &["disk", "strands", "--count", "20", "--start", "busy"])),
        ("disk strands", "--seed", differs(STRANDS, &["disk", "strands", "--count", "20", "--seed", "5"])),
        // disk closed-loop
        (
            "disk closed-loop",
            "--model",
            differs(
                &["disk", "closed-loop", "--count", "200"],
                &["disk", "closed-loop", "--count", "200", "--model", "atlas10k"],
            ),
        ),
        (
            "disk closed-loop",
            "--set",
            differs(
                &["disk", "closed-loop", "--count", "200"],
                &["disk", "closed-loop", "--count", "200", "--set", "disk0:Read completion overhead=2.0"],
            ),
        ),
        (
            "disk closed-loop",
            "--queue-depth",
            differs(
                &["disk", "closed-loop", "--count", "200"],
                &["disk", "closed-loop", "--count", "200", "--queue-depth", "4"],
            ),
        ),
        (
            "disk closed-loop",
            "--scheduler",
            differs(
                &["disk", "closed-loop", "--count", "200", "--queue-depth", "4"],
                &["disk", "closed-loop", "--count", "200", "--queue-depth", "4", "--scheduler", "fcfs"],
            ),
        ),
        (
            "disk closed-loop",
            "--op",
            differs(
                &["disk", "closed-loop", "--count", "200"],
                &["disk", "closed-loop", "--count", "200", "--op", "write"],
            ),
        ),
        (
            "disk closed-loop",
            "--blocks",
            differs(
                &["disk", "closed-loop", "--count", "200"],
                &["disk", "closed-loop", "--count", "200", "--blocks", "16"],
            ),
        ),
        (
            "disk closed-loop",
            "--count",
            differs(&["disk", "closed-loop", "--count", "200"], &["disk", "closed-loop", "--count", "201"]),
        ),
        (
            "disk closed-loop",
            "--seed",
            differs(
                &["disk", "closed-loop", "--count", "200"],
                &["disk", "closed-loop", "--count", "200", "--seed", "3"],
            ),
        ),
        (
            "reproduce wafl-delete",
            "--model",
            differs(
                &[
                    "reproduce",
                    "wafl-delete",
                    "--scale",
                    "0.0001",
                    "--aging-writes-per-piece",
                    "0.1",
                    "--out",
                    "{tmp}/out",
                ],
                &[
                    "reproduce",
                    "wafl-delete",
                    "--scale",
                    "0.0001",
                    "--aging-writes-per-piece",
                    "0.1",
                    "--out",
                    "{tmp}/out",
                    "--model",
                    "cheetah15k5",
                ],
            ),
        ),
        (
            "reproduce wafl-overwrite",
            "--model",
            differs(
                &[
                    "reproduce",
                    "wafl-overwrite",
                    "--scale",
                    "0.0001",
                    "--aging-writes-per-piece",
                    "0.1",
                    "--writes",
                    "200",
                    "--out",
                    "{tmp}/out",
                ],
                &[
                    "reproduce",
                    "wafl-overwrite",
                    "--scale",
                    "0.0001",
                    "--aging-writes-per-piece",
                    "0.1",
                    "--writes",
                    "200",
                    "--out",
                    "{tmp}/out",
                    "--model",
                    "cheetah15k5",
                ],
            ),
        ),
        (
            "reproduce realloc-on-read",
            "--model",
            differs(
                &["reproduce", "realloc-on-read", "--scale", "0.0001", "--out", "{tmp}/out", "--model", "cheetah15k5"],
                &["reproduce", "realloc-on-read", "--scale", "0.0001", "--out", "{tmp}/out", "--model", "nearline7200"],
            ),
        ),
        (
            "volume create",
            "--read-realloc",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--read-realloc", "on"],
            ),
        ),
        (
            "volume create",
            "--copy-out",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--copy-out", "on"],
            ),
        ),
        (
            "volume create",
            "--copy-out",
            refused(&["volume", "create", "{vol}", "--layout", "in-place", "--copy-out", "on"]),
        ),
        (
            "volume create",
            "--delete-log",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--delete-log", "bflog"],
            ),
        ),
        // volume create
        (
            "volume create",
            "--data",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--data", "disk.img"],
            ),
        ),
        (
            "volume create",
            "--disks",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--disks", "3"],
            ),
        ),
        (
            "volume create",
            "--disks",
            refused(&["volume", "create", "{vol}", "--disks", "2", "--data", "a.img", "--data", "b.img"]),
        ),
        (
            "volume create",
            "--data-size",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "128M", "--flash-size", "8M"],
            ),
        ),
        (
            "volume create",
            "--flash",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--flash", "fast.img"],
            ),
        ),
        (
            "volume create",
            "--flash-size",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "16M"],
            ),
        ),
        (
            "volume create",
            "--layout",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--layout", "in-place"],
            ),
        ),
        (
            "volume create",
            "--raid",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--disks", "3"],
                &[
                    "volume",
                    "create",
                    "{vol}",
                    "--data-size",
                    "64M",
                    "--flash-size",
                    "8M",
                    "--disks",
                    "3",
                    "--raid",
                    "raid4",
                ],
            ),
        ),
        (
            "volume create",
            "--stripe-unit",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--disks", "3"],
                &[
                    "volume",
                    "create",
                    "{vol}",
                    "--data-size",
                    "64M",
                    "--flash-size",
                    "8M",
                    "--disks",
                    "3",
                    "--stripe-unit",
                    "64K",
                ],
            ),
        ),
        (
            "volume create",
            "--stripe-unit",
            refused(&["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--stripe-unit", "64K"]),
        ),
        (
            "volume create",
            "--direct",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--direct"],
            ),
        ),
        (
            "volume create",
            "--preallocate",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--preallocate"],
            ),
        ),
        (
            "volume create",
            "--json",
            differs(
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M"],
                &["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--json"],
            ),
        ),
        (
            "volume create",
            "--force",
            refused(&["volume", "create", "{vol}", "--data-size", "64M", "--flash-size", "8M", "--force"]),
        ),
        // extent, snapshot, status, fsck on a small volume
        (
            "extent create",
            "--thin",
            Probe::Enables {
                setup: VOLUME,
                without: &["extent", "create", "{vol}", "big", "--size", "128M"],
                with: &["extent", "create", "{vol}", "big", "--size", "128M", "--thin"],
            },
        ),
        (
            "extent resize",
            "--thin",
            Probe::Enables {
                setup: VOLUME,
                without: &["extent", "resize", "{vol}", "lun0", "--size", "128M"],
                with: &["extent", "resize", "{vol}", "lun0", "--size", "128M", "--thin"],
            },
        ),
        (
            "extent create",
            "--size",
            differs_on_volume(
                &["extent", "create", "{vol}", "lun1", "--size", "4M"],
                &["extent", "create", "{vol}", "lun1", "--size", "8M"],
            ),
        ),
        (
            "extent create",
            "--json",
            differs_on_volume(
                &["extent", "create", "{vol}", "lun1", "--size", "4M"],
                &["extent", "create", "{vol}", "lun1", "--size", "4M", "--json"],
            ),
        ),
        (
            "extent delete",
            "--json",
            differs_on_volume(&["extent", "delete", "{vol}", "lun0"], &["extent", "delete", "{vol}", "lun0", "--json"]),
        ),
        (
            "extent resize",
            "--size",
            differs_on_volume(
                &["extent", "resize", "{vol}", "lun0", "--size", "8M"],
                &["extent", "resize", "{vol}", "lun0", "--size", "12M"],
            ),
        ),
        (
            "extent resize",
            "--json",
            differs_on_volume(
                &["extent", "resize", "{vol}", "lun0", "--size", "8M"],
                &["extent", "resize", "{vol}", "lun0", "--size", "8M", "--json"],
            ),
        ),
        (
            "extent clone",
            "--thin",
            Probe::Enables {
                setup: VOLUME_WITH_A_LARGE_EXTENT,
                without: &["extent", "clone", "{vol}", "lun0", "copy"],
                with: &["extent", "clone", "{vol}", "lun0", "copy", "--thin"],
            },
        ),
        (
            "extent clone",
            "--json",
            differs_on_volume(
                &["extent", "clone", "{vol}", "lun0@s1", "copy"],
                &["extent", "clone", "{vol}", "lun0@s1", "copy", "--json"],
            ),
        ),
        (
            "extent list",
            "--json",
            differs_on_volume(&["extent", "list", "{vol}"], &["extent", "list", "{vol}", "--json"]),
        ),
        (
            "snapshot create",
            "--json",
            differs_on_volume(&["snapshot", "create", "{vol}", "s2"], &["snapshot", "create", "{vol}", "s2", "--json"]),
        ),
        (
            "snapshot list",
            "--json",
            differs_on_volume(&["snapshot", "list", "{vol}"], &["snapshot", "list", "{vol}", "--json"]),
        ),
        (
            "snapshot delete",
            "--json",
            differs_on_volume(&["snapshot", "delete", "{vol}", "s1"], &["snapshot", "delete", "{vol}", "s1", "--json"]),
        ),
        (
            "snapshot restore",
            "--extent",
            differs_on_volume(
                &["snapshot", "restore", "{vol}", "s1"],
                &["snapshot", "restore", "{vol}", "s1", "--extent", "lun0"],
            ),
        ),
        (
            "snapshot restore",
            "--json",
            differs_on_volume(
                &["snapshot", "restore", "{vol}", "s1"],
                &["snapshot", "restore", "{vol}", "s1", "--json"],
            ),
        ),
        ("status", "--json", differs_on_volume(&["status", "{vol}"], &["status", "{vol}", "--json"])),
        ("fsck", "--json", differs_on_volume(&["fsck", "{vol}"], &["fsck", "{vol}", "--json"])),
        ("scrub", "--json", differs_on_volume(&["scrub", "{vol}"], &["scrub", "{vol}", "--json"])),
        // serve
        (
            "serve",
            "--socket",
            Probe::ServeDiffers {
                first: &["--listen", "127.0.0.1:{port}"],
                second: &["--listen", "127.0.0.1:{port}", "--socket", "{tmp}/nbd.sock"],
            },
        ),
        (
            "serve",
            "--listen",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock"],
                second: &["--socket", "{tmp}/nbd.sock", "--listen", "127.0.0.1:{port}"],
            },
        ),
        (
            "serve",
            "--max-connections",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock"],
                second: &["--socket", "{tmp}/nbd.sock", "--max-connections", "3"],
            },
        ),
        (
            "serve",
            "--reply-timeout",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock"],
                second: &["--socket", "{tmp}/nbd.sock", "--reply-timeout", "7"],
            },
        ),
        (
            "serve",
            "--max-connections",
            Probe::Refused {
                setup: VOLUME,
                args: &["serve", "{vol}", "--socket", "{tmp}/nbd.sock", "--max-connections", "0"],
            },
        ),
        (
            "serve",
            "--memory-per-connection",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock"],
                second: &["--socket", "{tmp}/nbd.sock", "--memory-per-connection", "48M"],
            },
        ),
        (
            "serve",
            "--memory-per-connection",
            Probe::Refused {
                setup: VOLUME,
                args: &["serve", "{vol}", "--socket", "{tmp}/nbd.sock", "--memory-per-connection", "1M"],
            },
        ),
        (
            "serve",
            "--memory-total",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock"],
                second: &["--socket", "{tmp}/nbd.sock", "--memory-total", "512M"],
            },
        ),
        (
            "serve",
            "--memory-total",
            Probe::Refused {
                setup: VOLUME,
                args: &["serve", "{vol}", "--socket", "{tmp}/nbd.sock", "--memory-total", "40M"],
            },
        ),
        (
            "serve",
            "--read-ahead",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock"],
                second: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on"],
            },
        ),
        (
            "serve",
            "--read-ahead",
            Probe::Refused {
                setup: VOLUME,
                args: &[
                    "serve",
                    "{vol}",
                    "--socket",
                    "{tmp}/nbd.sock",
                    "--read-ahead",
                    "off",
                    "--read-ahead-size",
                    "4M",
                ],
            },
        ),
        (
            "serve",
            "--read-ahead-size",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on"],
                second: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on", "--read-ahead-size", "4M"],
            },
        ),
        (
            "serve",
            "--read-ahead-streams",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on"],
                second: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on", "--read-ahead-streams", "4"],
            },
        ),
        (
            "serve",
            "--read-ahead-streams",
            Probe::Refused {
                setup: VOLUME,
                args: &[
                    "serve",
                    "{vol}",
                    "--socket",
                    "{tmp}/nbd.sock",
                    "--read-ahead",
                    "on",
                    "--read-ahead-streams",
                    "0",
                ],
            },
        ),
        (
            "serve",
            "--read-ahead-requests",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on"],
                second: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on", "--read-ahead-requests", "2"],
            },
        ),
        (
            "serve",
            "--read-ahead-memory",
            Probe::ServeDiffers {
                first: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on"],
                second: &["--socket", "{tmp}/nbd.sock", "--read-ahead", "on", "--read-ahead-memory", "200M"],
            },
        ),
        (
            "serve",
            "--read-ahead-memory",
            Probe::Refused {
                setup: VOLUME,
                args: &[
                    "serve",
                    "{vol}",
                    "--socket",
                    "{tmp}/nbd.sock",
                    "--read-ahead",
                    "on",
                    "--read-ahead-size",
                    "4M",
                    "--read-ahead-memory",
                    "4M",
                ],
            },
        ),
    ]
}

/// Every probe: the table above and those built by the helpers below.
fn all_probes() -> Vec<(&'static str, &'static str, Probe)> {
    probes().into_iter().chain(experiment_probes()).chain(replay_probes()).chain(sweep_probes()).collect()
}

/// The words of `proxima reproduce EXPERIMENT BASE… --out {tmp}/out`, with
/// each `(option, value)` pair of `change` replacing the value the base gives
/// that option, or added.
fn reproduce_words(experiment: &'static str, base: Words, change: Words) -> Words {
    let mut words: Vec<&'static str> = vec!["reproduce", experiment];
    words.extend(base);
    words.extend(["--out", "{tmp}/out"]);
    for pair in change.chunks(2) {
        match words.iter().position(|&word| word == pair[0]) {
            Some(at) => words[at + 1] = pair[1],
            None => words.extend(pair),
        }
    }
    words.leak()
}

/// The probes of one `reproduce` experiment run cheaply with `base`: each
/// `(option, change)` of `changes` must change the output (`--out` and
/// `--seed`, which every experiment takes, are probed here), each of
/// `refusals` must be refused.
fn experiment(
    experiment: &'static str,
    base: Words,
    changes: &[(&'static str, Words)],
    refusals: &[(&'static str, Words)],
) -> Vec<(&'static str, &'static str, Probe)> {
    const EVERY_EXPERIMENT: [(&str, Words); 2] =
        [("--out", &["--out", "{tmp}/elsewhere"]), ("--seed", &["--seed", "2"])];
    let command: &'static str = format!("reproduce {experiment}").leak();
    let unchanged = reproduce_words(experiment, base, &[]);
    let differing = EVERY_EXPERIMENT
        .iter()
        .chain(changes)
        .map(|&(option, change)| (command, option, differs(unchanged, reproduce_words(experiment, base, change))));
    let refused_ones =
        refusals.iter().map(|&(option, change)| (command, option, refused(reproduce_words(experiment, base, change))));
    differing.chain(refused_ones).collect()
}

/// The base of the layout experiments' probes: the smaller of the two
/// drives they are run on (146 GB against 1 TB), at the smallest scale that
/// leaves it a few extents; `--model` is probed with the larger.
const CHEETAH_BASE: Words = &["--model", "cheetah15k5", "--scale", "0.0001"];

/// The `reproduce` experiments' probes, each experiment run cheaply with
/// its base arguments (those that need two runs off the base are in
/// [`probes`]).
fn experiment_probes() -> Vec<(&'static str, &'static str, Probe)> {
    let mut probes = Vec::new();
    probes.extend(experiment(
        "proximal-disk",
        &["--count", "2"],
        &[("--model", &["--model", "atlas10k"]), ("--count", &["--count", "3"])],
        &[("--scale", &["--scale", "0.01"]), ("--jobs", &["--jobs", "2"])],
    ));
    // --jobs leaves the figures alone by design (crates/lab/tests/
    // layout_experiments_are_deterministic.rs); the run reports how many
    // simulations it ran at once.
    probes.extend(experiment(
        "proximal-table2",
        CHEETAH_BASE,
        &[
            ("--model", &["--model", "nearline7200"]),
            ("--scale", &["--scale", "0.00015"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    probes.extend(experiment(
        "proximal-table3",
        CHEETAH_BASE,
        &[
            ("--model", &["--model", "nearline7200"]),
            ("--scale", &["--scale", "0.00015"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    probes.extend(experiment(
        "proximal-srarw",
        CHEETAH_BASE,
        &[
            ("--model", &["--model", "nearline7200"]),
            ("--scale", &["--scale", "0.00015"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    // hylog-proximal: four SRARW runs at the smallest scale.
    probes.extend(experiment(
        "hylog-proximal",
        CHEETAH_BASE,
        &[
            ("--model", &["--model", "nearline7200"]),
            ("--scale", &["--scale", "0.00015"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    // proximal-snapshots: fifteen runs, on the small drive at the smallest
    // scale that leaves room for two extents beside the snapshot reserve.
    probes.extend(experiment(
        "proximal-snapshots",
        CHEETAH_BASE,
        &[
            ("--model", &["--model", "nearline7200"]),
            ("--scale", &["--scale", "0.00015"]),
            ("--jobs", &["--jobs", "2"]),
            ("--keep", &["--keep", "1"]),
            ("--reserve", &["--reserve", "end"]),
            ("--range-reserve", &["--range-reserve", "100"]),
        ],
        &[
            ("--count", &["--count", "5"]),
            ("--keep", &["--keep", "0"]),
            ("--range-reserve", &["--reserve", "end", "--range-reserve", "10"]),
            ("--range-reserve", &["--range-reserve", "100000"]),
        ],
    ));
    // foreground-priority: the smallest array for two virtual seconds.
    probes.extend(experiment(
        "foreground-priority",
        &["--scale", "0.0005", "--seconds", "2", "--limits", "1"],
        &[
            ("--model", &["--model", "cheetah15k5"]),
            ("--jobs", &["--jobs", "2"]),
            ("--clients", &["--clients", "2"]),
            ("--read-percent", &["--read-percent", "90"]),
            ("--think-ms", &["--think-ms", "1"]),
            ("--seconds", &["--seconds", "3"]),
            ("--scale", &["--scale", "0.0006"]),
            ("--limits", &["--limits", "4"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    // many-streams: two streams on one disk for two virtual seconds.
    probes.extend(experiment(
        "many-streams",
        &["--streams", "2", "--readahead-mib", "1", "--disks", "1", "--seconds", "2"],
        &[
            ("--model", &["--model", "cheetah15k5"]),
            ("--jobs", &["--jobs", "2"]),
            ("--streams", &["--streams", "3"]),
            ("--readahead-mib", &["--readahead-mib", "2"]),
            ("--disks", &["--disks", "2"]),
            ("--seconds", &["--seconds", "3"]),
            ("--request-kib", &["--request-kib", "64"]),
            ("--think-ms", &["--think-ms", "1"]),
            ("--dispatch-streams", &["--dispatch-streams", "1"]),
            ("--requests-per-turn", &["--requests-per-turn", "2"]),
            ("--memory-mib", &["--memory-mib", "64"]),
        ],
        &[("--memory-mib", &["--memory-mib", "1"]), ("--scale", &["--scale", "0.001"]), ("--count", &["--count", "5"])],
    ));
    // hylog-model: exact arithmetic, and a simulated drive that --model,
    // --seed and --count choose and measure.
    probes.extend(experiment(
        "hylog-model",
        &["--count", "50"],
        &[("--model", &["--model", "cheetah15k5"]), ("--count", &["--count", "51"])],
        &[("--scale", &["--scale", "0.01"]), ("--jobs", &["--jobs", "2"])],
    ));
    probes.extend(experiment(
        "wafl-delete",
        &["--scale", "0.00004", "--aging-writes-per-piece", "0.1"],
        &[
            ("--jobs", &["--jobs", "2"]),
            ("--fill", &["--fill", "0.6"]),
            ("--frees-per-checkpoint", &["--frees-per-checkpoint", "512"]),
            ("--scale", &["--scale", "0.00005"]),
            ("--aging-writes-per-piece", &["--aging-writes-per-piece", "0.2"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    probes.extend(experiment(
        "wafl-overwrite",
        &["--scale", "0.00004", "--aging-writes-per-piece", "0.1", "--writes", "200"],
        &[
            ("--jobs", &["--jobs", "2"]),
            ("--fill", &["--fill", "0.6"]),
            ("--writes-per-checkpoint", &["--writes-per-checkpoint", "50"]),
            ("--scale", &["--scale", "0.00005"]),
            ("--aging-writes-per-piece", &["--aging-writes-per-piece", "0.2"]),
            ("--writes", &["--writes", "300"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    probes.extend(experiment(
        "realloc-on-read",
        &["--scale", "0.00004"],
        &[
            ("--scale", &["--scale", "0.00005"]),
            ("--jobs", &["--jobs", "2"]),
            ("--fill", &["--fill", "0.5"]),
            ("--aging-ios-per-piece", &["--aging-ios-per-piece", "0.5"]),
            ("--threads", &["--threads", "4"]),
        ],
        &[("--count", &["--count", "5"])],
    ));
    // aging: a tiny array, two extents of 1 MiB, one aging round; every
    // flag changes the rows or the opening line.
    probes.extend(experiment(
        "aging",
        &["--extents", "2", "--extent-mib", "1", "--rounds", "1"],
        &[
            ("--model", &["--model", "cheetah15k5"]),
            ("--extents", &["--extents", "3"]),
            ("--extent-mib", &["--extent-mib", "2"]),
            ("--chunk-kib", &["--chunk-kib", "8"]),
            ("--rounds", &["--rounds", "2"]),
            ("--overwrite-fraction", &["--overwrite-fraction", "0.2"]),
            ("--staging", &["--staging", "0.2"]),
            ("--read-kib", &["--read-kib", "64"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[("--scale", &["--scale", "0.001"]), ("--count", &["--count", "5"])],
    ));
    // A database of 5 % of the DSP 3105, a hundred transactions.
    probes.extend(experiment(
        "hylog-table3",
        &["--utilization", "0.05", "--transactions", "100", "--rewrites", "1", "--buffer-pool-mib", "1"],
        &[
            ("--model", &["--model", "atlas10k", "--utilization", "0.005"]),
            ("--utilization", &["--utilization", "0.06"]),
            ("--transactions", &["--transactions", "101"]),
            ("--rewrites", &["--rewrites", "2"]),
            ("--buffer-pool-mib", &["--buffer-pool-mib", "2"]),
            ("--cpu-ms", &["--cpu-ms", "1"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[
            ("--utilization", &["--utilization", "1.5"]),
            ("--transactions", &["--transactions", "100000", "--utilization", "0.9"]),
            ("--buffer-pool-mib", &["--buffer-pool-mib", "4096"]),
            ("--cpu-ms", &["--cpu-ms", "2000"]),
            ("--scale", &["--scale", "0.01"]),
            ("--count", &["--count", "5"]),
        ],
    ));
    // Figure 6 at one utilisation, Figure 7 at one share, Figure 8 at one
    // point of each sweep, Figure 9: twenty runs of four users on a
    // two-warehouse database, one virtual second each.
    probes.extend(experiment(
        "hylog-throughput",
        &[
            "--model",
            "atlas10k",
            "--utilizations",
            "0.9",
            "--detail-utilization",
            "0.9",
            "--hot-fractions",
            "0.5",
            "--warehouses",
            "2",
            "--buffer-pool-mib",
            "4",
            "--users",
            "4",
            "--disks",
            "1",
            "--rewrites",
            "0.2",
            "--measure-seconds",
            "1",
            "--fig8-users",
            "4",
            "--fig8-disks",
            "1",
            "--fig8-utilizations",
            "0.9",
        ],
        &[
            ("--model", &["--model", "disk2003"]),
            ("--utilizations", &["--utilizations", "0.85"]),
            ("--detail-utilization", &["--detail-utilization", "0.85"]),
            ("--hot-fractions", &["--hot-fractions", "0.3"]),
            ("--warehouses", &["--warehouses", "3"]),
            ("--buffer-pool-mib", &["--buffer-pool-mib", "8"]),
            ("--users", &["--users", "6"]),
            ("--disks", &["--disks", "2"]),
            ("--rewrites", &["--rewrites", "0.3"]),
            ("--measure-seconds", &["--measure-seconds", "2"]),
            ("--fig8-users", &["--fig8-users", "2"]),
            ("--fig8-disks", &["--fig8-disks", "2"]),
            ("--fig8-utilizations", &["--fig8-utilizations", "0.85"]),
            ("--seeds", &["--seeds", "2"]),
            ("--jobs", &["--jobs", "1"]),
        ],
        &[
            ("--utilizations", &["--utilizations", "1.2"]),
            ("--fig8-utilizations", &["--fig8-utilizations", "1.5"]),
            ("--fig8-users", &["--fig8-users", "0"]),
            ("--seeds", &["--seeds", "0"]),
            ("--detail-utilization", &["--detail-utilization", "0"]),
            ("--hot-fractions", &["--hot-fractions", "1.5"]),
            ("--rewrites", &["--rewrites", "0.01"]),
            ("--scale", &["--scale", "0.01"]),
            ("--count", &["--count", "5"]),
        ],
    ));
    // One utilisation on a small engine volume and simulator disk.
    probes.extend(experiment(
        "hylog-cleaning",
        &["--engine-blocks", "8192", "--segments", "1024", "--rewrites", "1", "--utilizations", "0.6"],
        &[
            ("--model", &["--model", "disk2003"]),
            ("--engine-blocks", &["--engine-blocks", "12288"]),
            ("--segments", &["--segments", "1100"]),
            ("--rewrites", &["--rewrites", "2"]),
            ("--utilizations", &["--utilizations", "0.6,0.7"]),
            ("--jobs", &["--jobs", "2"]),
        ],
        &[
            ("--engine-blocks", &["--engine-blocks", "4096", "--utilizations", "0.9"]),
            ("--segments", &["--segments", "200"]),
            ("--utilizations", &["--utilizations", "0.7,0.6"]),
            ("--scale", &["--scale", "0.01"]),
            ("--count", &["--count", "5"]),
        ],
    ));
    probes
}

/// `proxima replay` of a trace sample, and the same with `extra`.
fn replay(trace: &'static str, base: Words, extra: Words) -> Probe {
    let path: &'static str = format!("{{traces}}/{trace}").leak();
    let first: Vec<&'static str> = ["replay", path].iter().chain(base).copied().collect();
    let second: Vec<&'static str> = first.iter().chain(extra).copied().collect();
    differs(first.leak(), second.leak())
}

/// The replay probes: every option on the DiskSim ascii sample (or the
/// Systor one, which records response times and is out of order) replayed on
/// the disk model, and the volume target's options on the Systor sample.
fn replay_probes() -> Vec<(&'static str, &'static str, Probe)> {
    const ASCII: &str = "disksim-ascii.trace";
    // Records response times (dependency mode needs them) and out of order.
    const SYSTOR: &str = "systor17-sample.csv.gz";
    const NO_BASE: Words = &[];
    const DEPENDENCY: Words = &["--mode", "dependency"];
    const SLICED: Words = &["--device-map", "split:100000"];
    const ON_A_VOLUME: Words = &["--target", "volume"];
    let no_disk_option_with_nbd: &'static [&'static str] =
        &["replay", "{traces}/disksim-ascii.trace", "--nbd", "nbd+unix:///lun0?socket={tmp}/none.sock"];
    let with = |extra: &[&'static str]| -> Words {
        no_disk_option_with_nbd.iter().chain(extra).copied().collect::<Vec<_>>().leak()
    };
    vec![
        ("replay", "--format", replay(ASCII, NO_BASE, &["--format", "disksim-ns"])),
        ("replay", "--target", refused(with(&["--target", "disk"]))),
        ("replay", "--target", replay(SYSTOR, NO_BASE, &["--target", "volume"])),
        ("replay", "--layout", replay(SYSTOR, ON_A_VOLUME, &["--layout", "in-place"])),
        ("replay", "--layout", refused(&["replay", "{traces}/systor17-sample.csv.gz", "--layout", "in-place"])),
        ("replay", "--staging", replay(SYSTOR, ON_A_VOLUME, &["--staging", "5"])),
        ("replay", "--staging", refused(&["replay", "{traces}/systor17-sample.csv.gz", "--staging", "5"])),
        ("replay", "--volume-size", replay(SYSTOR, ON_A_VOLUME, &["--volume-size", "64M"])),
        ("replay", "--volume-size", refused(with(&["--volume-size", "64M"]))),
        ("replay", "--model", replay(ASCII, NO_BASE, &["--model", "atlas10k"])),
        ("replay", "--set", replay(ASCII, NO_BASE, &["--set", "disk0:Read completion overhead=2.0"])),
        ("replay", "--seed", replay(ASCII, NO_BASE, &["--seed", "7"])),
        ("replay", "--nbd", refused(with(&["--model", "atlas10k"]))),
        ("replay", "--mode", replay(ASCII, NO_BASE, &["--mode", "afap"])),
        ("replay", "--scale", replay(ASCII, NO_BASE, &["--scale", "2"])),
        ("replay", "--in-flight-max", replay(ASCII, &["--mode", "afap"], &["--in-flight-max", "1"])),
        ("replay", "--bundle-us", replay(ASCII, NO_BASE, &["--bundle-us", "5000"])),
        ("replay", "--think-threshold-us", replay(SYSTOR, DEPENDENCY, &["--think-threshold-us", "100000"])),
        ("replay", "--lookahead", replay(SYSTOR, DEPENDENCY, &["--lookahead", "1"])),
        ("replay", "--device-map", replay(ASCII, NO_BASE, SLICED)),
        ("replay", "--only-device", replay(ASCII, NO_BASE, &["--only-device", "1"])),
        ("replay", "--block-bytes", replay(ASCII, NO_BASE, &["--block-bytes", "65536"])),
        ("replay", "--out-of-range", replay(ASCII, SLICED, &["--out-of-range", "skip"])),
        ("replay", "--order-window", replay(SYSTOR, NO_BASE, &["--order-window", "1"])),
        ("replay", "--per-request", replay(ASCII, NO_BASE, &["--per-request", "{tmp}/requests.csv"])),
        ("replay", "--plots", replay(ASCII, NO_BASE, &["--plots", "{tmp}/plots"])),
    ]
}

/// The sweep probes, on a sweep of two cheap replays. `--jobs` changes how
/// many cells run at once, never the results (the sweep test checks the
/// tables are the same); `--ray` runs in CI against a local Ray cluster
/// (tools/ray/ci-sweep.sh).
fn sweep_probes() -> Vec<(&'static str, &'static str, Probe)> {
    const TINY: &str = "{sweeps}/sweep-tiny.toml";
    vec![
        ("sweep", "--out", differs(&["sweep", TINY], &["sweep", TINY, "--out", "{tmp}/elsewhere"])),
        ("sweep", "--jobs", refused(&["sweep", TINY, "--jobs", "2", "--ray", "127.0.0.1:1"])),
        ("sweep", "--ray", refused(&["sweep", TINY, "--ray", "127.0.0.1:1", "--jobs", "1"])),
        ("sweep", "--ray-python", refused(&["sweep", TINY, "--ray-python", "/usr/bin/python3"])),
    ]
}

/// `disk bench` with and without `extra` (1000 requests unless `extra` says);
/// only the simulated figures are compared, the rest being wall time.
fn bench(extra: Words) -> Probe {
    let requests: Words = if extra.contains(&"--requests") { &[] } else { &["--requests", "1000"] };
    let second: Vec<&'static str> = ["disk", "bench"].iter().chain(requests).chain(extra).copied().collect();
    Probe::Differs {
        setup: NO_SETUP,
        first: &["disk", "bench", "--requests", "1000"],
        second: second.leak(),
        compare: Compare::After(" wall, "),
    }
}

/// Every subcommand (as "disk strands") and its long options, help and version aside.
fn options_of_every_subcommand() -> Vec<(String, Vec<String>)> {
    fn walk(command: &clap::Command, path: &str, found: &mut Vec<(String, Vec<String>)>) {
        let subcommands: Vec<_> = command.get_subcommands().filter(|sub| sub.get_name() != "help").collect();
        if subcommands.is_empty() {
            let options = command
                .get_arguments()
                .filter_map(|argument| argument.get_long())
                .filter(|long| !matches!(*long, "help" | "version"))
                .map(|long| format!("--{long}"))
                .collect();
            found.push((path.to_owned(), options));
        }
        for sub in subcommands {
            let sub_path =
                if path.is_empty() { sub.get_name().to_owned() } else { format!("{path} {}", sub.get_name()) };
            walk(sub, &sub_path, found);
        }
    }
    let mut found = Vec::new();
    walk(&proxima_cli::Cli::command(), "", &mut found);
    found
}

#[test]
fn every_option_of_every_subcommand_has_a_probe() {
    let probes = all_probes();
    let probed: BTreeSet<(&str, &str)> = probes.iter().map(|(command, option, _)| (*command, *option)).collect();
    let mut missing = Vec::new();
    let walked = options_of_every_subcommand();
    assert!(walked.len() >= 15, "the walk found the subcommands: {walked:?}");
    for (command, options) in &walked {
        for option in options {
            if !probed.contains(&(command.as_str(), option.as_str())) {
                missing.push(format!("{command} {option}"));
            }
        }
    }
    assert!(missing.is_empty(), "options without a probe: {missing:?}");
    // Each experiment takes or refuses each flag that only some experiments take.
    for experiment in proxima_lab::EXPERIMENTS {
        let subcommand = format!("reproduce {}", experiment.name());
        for flag in ["--scale", "--count", "--jobs"] {
            let covered = probes.iter().any(|(command, option, probe)| {
                *command == subcommand && *option == flag && probe_words(probe).contains(&experiment.name())
            });
            assert!(covered, "{subcommand} {flag} has no probe",);
        }
    }
}

fn probe_words(probe: &Probe) -> Vec<&'static str> {
    match probe {
        Probe::Differs { first, second, .. } => first.iter().chain(second.iter()).copied().collect(),
        Probe::Refused { args, .. } => args.to_vec(),
        Probe::ServeDiffers { first, second } => first.iter().chain(second.iter()).copied().collect(),
        Probe::Enables { without, with, .. } => without.iter().chain(with.iter()).copied().collect(),
    }
}

/// A fresh temporary directory and the placeholders' values in it.
struct Scene {
    temporary: tempfile::TempDir,
    port: String,
}

impl Scene {
    fn new(setup: &[Words]) -> Self {
        let temporary = tempfile::tempdir().expect("temporary directory");
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port().to_string();
        let scene = Self { temporary, port };
        for words in setup {
            let output = scene.command(words).output().expect("run a setup step");
            assert!(output.status.success(), "setup {words:?}: {}", String::from_utf8_lossy(&output.stderr));
        }
        scene
    }

    fn expand(&self, word: &str) -> String {
        let models = Path::new(env!("CARGO_MANIFEST_DIR")).join("../disk/models");
        let traces = Path::new(env!("CARGO_MANIFEST_DIR")).join("../workload/tests/data");
        let sweeps = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        word.replace("{vol}", &self.temporary.path().join("vol").display().to_string())
            .replace("{tmp}", &self.temporary.path().display().to_string())
            .replace("{models}", &models.display().to_string())
            .replace("{traces}", &traces.display().to_string())
            .replace("{sweeps}", &sweeps.display().to_string())
            .replace("{port}", &self.port)
    }

    fn command(&self, words: &[&str]) -> Command {
        let mut command = proxima();
        command.args(words.iter().map(|word| self.expand(word))).current_dir(self.temporary.path());
        command
    }

    /// Runs `words`, which must succeed; what it printed, `{tmp}` masked.
    fn output(&self, words: &[&str], compare: Compare) -> String {
        let output = self.command(words).output().expect("run proxima");
        let text = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        assert!(output.status.success(), "{words:?} failed with {}: {text}", output.status);
        let text = text.replace(&self.temporary.path().display().to_string(), "{tmp}");
        match compare {
            Compare::Output => {
                let timeless: String =
                    text.lines().filter(|line| !line.starts_with("wall ")).map(|line| format!("{line}\n")).collect();
                format!("{timeless}files: {:?}\n", files_in(self.temporary.path()))
            }
            Compare::After(marker) => {
                text.lines().filter_map(|line| line.split_once(marker)).map(|(_, after)| format!("{after}\n")).collect()
            }
        }
    }

    /// Starts `proxima serve {vol} ARGS`, reads its announcement, stops it with
    /// SIGTERM, and returns the announcement.
    fn serve_announcement(&self, args: &[&str]) -> String {
        let mut child = self
            .command(&["serve", "{vol}"])
            .args(args.iter().map(|word| self.expand(word)))
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .expect("start proxima serve");
        let mut announcement = String::new();
        let mut lines = BufReader::new(child.stderr.take().expect("stderr")).lines();
        for line in lines.by_ref() {
            let line = line.expect("read the announcement");
            announcement.push_str(&line);
            announcement.push('\n');
            // The export list ends the announcement.
            if line.trim_start().starts_with("lun0") {
                break;
            }
        }
        let pid = i32::try_from(child.id()).expect("pid fits");
        // SAFETY: kill with a valid pid and signal has no memory effects.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let rest: Vec<String> = lines.map_while(Result::ok).collect();
        let status = child.wait().expect("wait for proxima serve");
        assert!(status.success(), "proxima serve {args:?} exited with {status}: {announcement}{rest:?}");
        announcement.replace(&self.temporary.path().display().to_string(), "{tmp}").replace(&self.port, "{port}")
    }
}

/// The paths of the files under `directory`, relative to it, sorted.
fn files_in(directory: &Path) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut pending = vec![directory.to_owned()];
    while let Some(current) = pending.pop() {
        for entry in std::fs::read_dir(&current).expect("list a directory").map(|entry| entry.expect("an entry")) {
            let path = entry.path();
            if path.is_dir() {
                pending.push(path);
            } else {
                files.insert(path.strip_prefix(directory).expect("under the directory").display().to_string());
            }
        }
    }
    files
}

/// What `words` print after `setup`: run twice the first time they are
/// asked for (the two runs must print the same) and remembered, since many
/// probes of an experiment share its base command.
fn repeatable_output(setup: &[Words], words: Words, compare: Compare, probe: &str) -> String {
    static OUTPUTS: OnceLock<Mutex<HashMap<String, String>>> = OnceLock::new();
    let outputs = OUTPUTS.get_or_init(Mutex::default);
    let key = format!("{setup:?} {words:?} {compare:?}");
    if let Some(output) = outputs.lock().expect("no probe panicked holding it").get(&key) {
        return output.clone();
    }
    let (once, again) = (Scene::new(setup).output(words, compare), Scene::new(setup).output(words, compare));
    assert_eq!(once, again, "{probe}: {words:?} prints the same twice");
    outputs.lock().expect("no probe panicked holding it").insert(key, once.clone());
    once
}

fn check(command: &str, option: &str, probe: &Probe) {
    match probe {
        Probe::Differs { setup, first, second, compare } => {
            let first_output = repeatable_output(setup, first, *compare, &format!("{command} {option}"));
            let second_output = Scene::new(setup).output(second, *compare);
            assert_ne!(first_output, second_output, "{command} {option} made no difference: {first:?} / {second:?}");
        }
        Probe::Refused { setup, args } => {
            let scene = Scene::new(setup);
            let output = scene.command(args).output().expect("run proxima");
            let stderr = String::from_utf8_lossy(&output.stderr);
            assert_eq!(output.status.code(), Some(2), "{command} {option} not refused: {args:?}: {stderr}");
            assert!(stderr.contains(option), "{command}: the refusal names {option}: {stderr}");
        }
        Probe::Enables { setup, without, with } => {
            let scene = Scene::new(setup);
            let refused = scene.command(without).output().expect("run proxima");
            assert!(!refused.status.success(), "{command} {option}: {without:?} succeeds without it");
            let allowed = scene.command(with).output().expect("run proxima");
            let stderr = String::from_utf8_lossy(&allowed.stderr);
            assert!(allowed.status.success(), "{command} {option}: {with:?} fails with it: {stderr}");
        }
        Probe::ServeDiffers { first, second } => {
            let announce = |args: &[&str]| Scene::new(VOLUME).serve_announcement(args);
            let (first_output, first_again) = (announce(first), announce(first));
            assert_eq!(first_output, first_again, "serve {first:?} announces the same twice");
            assert_ne!(first_output, announce(second), "serve {option} made no difference");
        }
    }
}

/// Runs the probes of the subcommands whose name starts with `family`, or of
/// every other one with `None` (one test per family, so they run in parallel).
fn check_family(family: Option<&str>) {
    check_family_share(family, 0, 1);
}

/// Checks every `share_count`-th probe of a family, from its `share`-th: a
/// family too slow for one core is checked by several tests, which the
/// harness runs at once.
fn check_family_share(family: Option<&str>, share: usize, share_count: usize) {
    const FAMILIES: [&str; 5] = ["disk", "reproduce", "serve", "replay", "sweep"];
    let in_family = all_probes().into_iter().filter(|(command, _, _)| {
        let first_word = command.split(' ').next().unwrap_or_default();
        match family {
            Some(family) => first_word == family,
            None => !FAMILIES.contains(&first_word),
        }
    });
    for (command, option, probe) in in_family.skip(share).step_by(share_count) {
        check(command, option, &probe);
    }
}

#[test]
fn the_disk_probes_hold() {
    check_family(Some("disk"));
}

// The reproduce probes run experiments: every other one in each of two tests.
#[test]
fn the_reproduce_probes_hold_first_share() {
    check_family_share(Some("reproduce"), 0, 2);
}

#[test]
fn the_reproduce_probes_hold_second_share() {
    check_family_share(Some("reproduce"), 1, 2);
}

#[test]
fn the_replay_probes_hold() {
    check_family(Some("replay"));
}

#[test]
fn the_sweep_probes_hold() {
    check_family(Some("sweep"));
}

#[test]
fn the_serve_probes_hold() {
    check_family(Some("serve"));
}

#[test]
fn the_volume_extent_snapshot_status_and_fsck_probes_hold() {
    check_family(None);
}
