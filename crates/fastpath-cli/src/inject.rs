//! `fastpath compare --inject`: the flags into the lab's options, the lab's experiment
//! (fastpath_lab::inject: TAP and io_uring TAP, UDP sink and a TCP bridge), the output.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use fastpath_lab::inject::{self, InjectOptions};
use serde_json::json;

use crate::args::CompareArgs;
use crate::error::CliResult;

pub fn run(a: &CompareArgs, stop: Arc<AtomicBool>) -> CliResult<()> {
    let o = InjectOptions { runs: a.runs, duration_s: a.duration };
    let rows = inject::run(&o, stop, &mut |l| eprintln!("{l}"))?;
    let Some(rows) = rows else {
        println!("compare --inject: set up and torn down (--duration 0)");
        return Ok(());
    };
    let cmd = inject::command(&o);
    if a.json {
        println!("{}", json!({"type": "compare-inject", "command": cmd, "rows": rows}));
        return Ok(());
    }
    print!("{}", inject::table(&rows, &cmd));
    Ok(())
}
