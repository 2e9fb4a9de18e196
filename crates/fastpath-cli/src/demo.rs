//! `fastpath demo`.
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use crate::args::DemoArgs;
use crate::error::CliResult;

pub fn run(_d: &DemoArgs, _stop: Arc<AtomicBool>) -> CliResult<()> {
    Err(crate::error::runtime(anyhow::anyhow!("demo: not yet")))
}
