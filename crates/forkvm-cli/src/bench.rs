//! `forkvm bench`: figures beside floors measured in the same run.

/// Options of `forkvm bench`.
#[derive(clap::Args)]
pub struct BenchArgs {
    /// Iterations per figure.
    #[arg(long, default_value_t = 300)]
    pub iterations: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// Runs the benchmark.
pub fn main(_args: BenchArgs) -> anyhow::Result<()> {
    anyhow::bail!("not yet")
}
