//! What a run cost on this machine (wall time and peak memory), and the line
//! that reports it beside how much was simulated. The wall time and memory
//! are the only figures of a report that are not exact for the seed.

use std::time::Instant;

/// The wall time and memory a measurement took.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WallCost {
    /// Wall seconds from the start of the measurement to its end.
    pub wall_seconds: f64,
    /// The process's peak resident memory, where the operating system reports it.
    pub peak_memory_bytes: Option<u64>,
}

impl WallCost {
    /// The cost of a measurement that started at `started` and has just ended.
    pub fn since(started: Instant) -> WallCost {
        WallCost { wall_seconds: started.elapsed().as_secs_f64(), peak_memory_bytes: peak_memory_bytes() }
    }

    /// A line for the terminal and the report: wall time, simulation rates,
    /// peak memory of the process.
    pub fn render(&self, simulated: &SimulatedWork) -> String {
        let seconds = self.wall_seconds.max(1e-9);
        let memory = self
            .peak_memory_bytes
            .map_or_else(|| "unknown".to_string(), |bytes| format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64));
        format!(
            "wall {:.1} s; {:.0} simulated user updates per wall second; {:.0} simulated disk I/Os per wall \
             second; peak memory (VmHWM) {memory}",
            seconds,
            simulated.updates as f64 / seconds,
            simulated.disk_ios as f64 / seconds
        )
    }
}

/// How much a run simulated: exact for the seed, saved with its rows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SimulatedWork {
    /// Simulated user updates.
    pub updates: u64,
    /// Simulated member-disk I/Os.
    pub disk_ios: u64,
}

/// The process's peak resident memory (`VmHWM` of /proc/self/status), where the
/// operating system reports it.
pub fn peak_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|line| line.starts_with("VmHWM:"))?;
    let kibibytes: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kibibytes * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peak_memory_is_read_from_the_process_status() {
        let bytes = peak_memory_bytes().expect("Linux reports VmHWM");
        assert!(bytes > 0);
    }

    #[test]
    fn the_cost_line_divides_the_work_by_the_wall_time() {
        let cost = WallCost { wall_seconds: 2.0, peak_memory_bytes: Some(3 << 20) };
        let line = cost.render(&SimulatedWork { updates: 100, disk_ios: 40 });
        assert_eq!(
            line,
            "wall 2.0 s; 50 simulated user updates per wall second; 20 simulated disk I/Os per wall second; \
             peak memory (VmHWM) 3.0 MiB"
        );
    }
}
