//! The `proxima` binary: everything is in the library (`src/lib.rs`).

fn main() -> std::process::ExitCode {
    proxima_cli::main()
}
