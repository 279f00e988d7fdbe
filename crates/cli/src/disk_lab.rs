//! `proxima disk strands` and `proxima disk closed-loop`: the disk-level
//! experiments of the proximal I/O paper on a simulated drive. Each prints a short
//! human summary and, as the last line of stdout, one JSON object.

use std::process::ExitCode;

use clap::{Args, ValueEnum};
use proxima_disk::{DiskOp, Scheduler};
use proxima_lab::seed000_proximal::closed_loop::{run_closed_loop, ClosedLoopConfig};
use proxima_lab::seed000_proximal::placement::{IssueOrder, Placement};
use proxima_lab::seed000_proximal::strands::{run_strands, StrandConfig, StrandStart};
use proxima_lab::LabError;
use serde_json::json;

use crate::disk::ModelArgs;
use crate::reproduce::TerminalProgress;

/// Read or write, on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OpArg {
    /// Read requests.
    Read,
    /// Write requests.
    Write,
}

impl OpArg {
    fn op(self) -> DiskOp {
        match self {
            OpArg::Read => DiskOp::Read,
            OpArg::Write => DiskOp::Write,
        }
    }
}

/// Where a strand's requests go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PatternArg {
    /// Uniformly within `--span` LBNs of a random base (the whole disk without `--span`).
    Random,
    /// Each request on the next track, reached right after the track switch.
    SemiSequential,
}

/// Issue order within a strand.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OrderArg {
    /// Ascending LBN.
    Ascending,
    /// A random permutation.
    Random,
}

/// How a strand meets the drive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StartArg {
    /// The drive is idle and starts the first request as it arrives.
    Idle,
    /// The strand queues behind one random read, so the scheduler picks even its first request.
    Busy,
}

/// The drive's scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SchedulerArg {
    /// First come, first served.
    Fcfs,
    /// Shortest positioning time first.
    Sptf,
    /// Circular LOOK.
    Clook,
}

impl SchedulerArg {
    fn scheduler(self) -> Scheduler {
        match self {
            SchedulerArg::Fcfs => Scheduler::Fcfs,
            SchedulerArg::Sptf => Scheduler::Sptf,
            SchedulerArg::Clook => Scheduler::CLook,
        }
    }
}

/// `proxima disk strands`.
#[derive(Debug, Args)]
pub struct StrandsArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Requests fall within this many LBNs of the strand's base (1024 track-approximate,
    /// 100000 proximal); the whole disk when omitted. Random pattern only.
    #[arg(long, value_name = "BLOCKS")]
    span: Option<u64>,
    /// Requests (4 KiB each) per strand.
    #[arg(long = "strand", value_name = "K", default_value_t = 8)]
    strand_size: u32,
    /// Strands to simulate.
    #[arg(long, value_name = "N", default_value_t = 1000)]
    count: u32,
    /// Read or write.
    #[arg(long, value_enum, default_value_t = OpArg::Read)]
    op: OpArg,
    /// Requests outstanding at the drive at once; the rest wait at the host.
    #[arg(long, value_name = "Q", default_value_t = 8)]
    queue_depth: u32,
    /// Issue order within a strand.
    #[arg(long, value_enum, default_value_t = OrderArg::Ascending)]
    order: OrderArg,
    /// Placement of the requests.
    #[arg(long, value_enum, default_value_t = PatternArg::Random)]
    pattern: PatternArg,
    /// Whether each strand meets an idle drive or one busy with a random read.
    #[arg(long, value_enum, default_value_t = StartArg::Idle)]
    start: StartArg,
    /// Seed of the run (placements, head positions, rotational phases, the OP).
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

/// `proxima disk closed-loop`.
#[derive(Debug, Args)]
pub struct ClosedLoopArgs {
    #[command(flatten)]
    model: ModelArgs,
    /// Requests kept outstanding (the drive's queue is made this deep).
    #[arg(long, value_name = "Q", default_value_t = 1)]
    queue_depth: u32,
    /// The drive's scheduler.
    #[arg(long, value_enum, default_value_t = SchedulerArg::Sptf)]
    scheduler: SchedulerArg,
    /// Read or write.
    #[arg(long, value_enum, default_value_t = OpArg::Read)]
    op: OpArg,
    /// Request size in DiskSim blocks of 512 bytes (8 is 4 KiB); requests start at multiples of it.
    #[arg(long, default_value_t = 8)]
    blocks: u32,
    /// Requests to complete.
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    count: u32,
    /// Seed of the request addresses and the platter's phase.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

fn fail(command: &str, error: &LabError) -> ExitCode {
    eprintln!("proxima disk {command}: {error}");
    match error {
        LabError::InvalidParameter { .. } | LabError::Model { .. } => ExitCode::from(2),
        _ => ExitCode::from(1),
    }
}

/// Runs `proxima disk strands`.
pub fn run_strands_command(args: &StrandsArgs) -> ExitCode {
    let model = match args.model.load() {
        Ok(model) => model,
        Err(error) => {
            eprintln!("proxima disk strands: {error}");
            return ExitCode::from(2);
        }
    };
    let placement = match (args.pattern, args.span) {
        (PatternArg::SemiSequential, Some(_)) => {
            eprintln!("proxima disk strands: --span does not apply to --pattern semi-sequential (each request is on the next track)");
            return ExitCode::from(2);
        }
        (PatternArg::SemiSequential, None) => Placement::SemiSequential,
        (PatternArg::Random, Some(span_lbn)) => Placement::Span { span_lbn },
        (PatternArg::Random, None) => Placement::Random,
    };
    let config = StrandConfig {
        placement,
        strand_size: args.strand_size,
        strand_count: args.count,
        op: args.op.op(),
        queue_depth: args.queue_depth,
        order: match args.order {
            OrderArg::Ascending => IssueOrder::Ascending,
            OrderArg::Random => IssueOrder::Random,
        },
        start: match args.start {
            StartArg::Idle => StrandStart::Idle,
            StartArg::Busy => StrandStart::Busy,
        },
        seed: args.seed,
    };
    let op_ms = match proxima_lab::seed000_proximal::closed_loop::measure_op_ms(&model, args.seed) {
        Ok(op_ms) => op_ms,
        Err(error) => return fail("strands", &error),
    };
    let mut progress = TerminalProgress::new();
    progress.begin("strands", u64::from(args.count));
    let result = run_strands(&model, &config, op_ms, &mut progress);
    progress.finish();
    let result = match result {
        Ok(result) => result,
        Err(error) => return fail("strands", &error),
    };
    println!(
        "model {}, seed {}: {} strands of {} ({}, {} order, queue depth {}, {} drive)",
        model.name(),
        args.seed,
        args.count,
        args.strand_size,
        placement.label(),
        config.order.label(),
        args.queue_depth,
        config.start.label()
    );
    println!(
        "strand {:.3} ms, per request {:.3} ms = {:.3} OP (1 OP = {:.3} ms), extra revolutions {:.3} on average",
        result.strand_ms, result.per_request_ms, result.per_request_op, result.op_ms, result.extra_revolutions_mean
    );
    let json = json!({
        "model": model.name(),
        "seed": args.seed,
        "pattern": placement.label(),
        "span": args.span,
        "strand": args.strand_size,
        "count": args.count,
        "op": if config.op == DiskOp::Read { "read" } else { "write" },
        "queue_depth": args.queue_depth,
        "order": config.order.label(),
        "start": config.start.label(),
        "strand_ms": result.strand_ms,
        "per_request_ms": result.per_request_ms,
        "per_request_op": result.per_request_op,
        "op_ms": result.op_ms,
        "extra_revolutions_mean": result.extra_revolutions_mean,
        "extra_revolutions_distribution": result.extra_revolutions_distribution,
    });
    println!("{json}");
    ExitCode::SUCCESS
}

/// Runs `proxima disk closed-loop`.
pub fn run_closed_loop_command(args: &ClosedLoopArgs) -> ExitCode {
    let model = match args.model.load() {
        Ok(model) => model,
        Err(error) => {
            eprintln!("proxima disk closed-loop: {error}");
            return ExitCode::from(2);
        }
    };
    let config = ClosedLoopConfig {
        queue_depth: args.queue_depth,
        scheduler: args.scheduler.scheduler(),
        op: args.op.op(),
        sectors_per_request: args.blocks,
        request_count: args.count,
        seed: args.seed,
    };
    let result = match run_closed_loop(&model, &config) {
        Ok(result) => result,
        Err(error) => return fail("closed-loop", &error),
    };
    println!(
        "model {}, seed {}: {} requests of {} sectors, {:?} at queue depth {}: {:.1} IOPS, mean response {:.3} ms",
        model.name(),
        args.seed,
        result.requests,
        args.blocks,
        config.scheduler,
        args.queue_depth,
        result.iops,
        result.mean_response_ms
    );
    let json = json!({
        "model": model.name(),
        "seed": args.seed,
        "queue_depth": args.queue_depth,
        "scheduler": format!("{:?}", args.scheduler).to_lowercase(),
        "op": if config.op == DiskOp::Read { "read" } else { "write" },
        "blocks": args.blocks,
        "requests": result.requests,
        "iops": result.iops,
        "mean_response_ms": result.mean_response_ms,
    });
    println!("{json}");
    ExitCode::SUCCESS
}
