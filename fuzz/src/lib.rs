//! forkvm's fuzz harnesses (see `harness`), one AFL++ binary per target in src/bin.

pub mod harness;
