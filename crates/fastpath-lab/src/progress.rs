//! Progress of a long run: one line per phase, on the experiment's `progress` sink (the command
//! prints it on stderr, with or without `--json`), saying which phase starts, how many are done
//! in how long, and the time left.
//!
//! The time left is the planned seconds of the phases not done yet, scaled by how long the done
//! ones took against their plan (before any is done, the plan as is): a run whose set-ups are
//! slower than planned on this machine gets a later estimate after its first phase.

use std::time::Instant;

/// `s` seconds as "45 s", "3 min 20 s" or "1 h 02 min" (rounded to whole seconds).
pub fn human_s(s: f64) -> String {
    let t = s.max(0.0).round() as u64;
    match t {
        0..=59 => format!("{t} s"),
        60..=3599 => format!("{} min {:02} s", t / 60, t % 60),
        _ => format!("{} h {:02} min", t / 3600, (t % 3600) / 60),
    }
}

/// Seconds left before phase `done` (0-based) starts, of phases planned to take `planned_s`
/// each, `elapsed_s` after the start: the plan of phases `done..` times (elapsed / plan of the
/// phases `..done`), or the plan alone when none is done (or its plan is 0).
pub fn left_s(planned_s: &[f64], done: usize, elapsed_s: f64) -> f64 {
    let done = done.min(planned_s.len());
    let (past, rest): (f64, f64) = (planned_s[..done].iter().sum(), planned_s[done..].iter().sum());
    if past > 0.0 {
        rest * elapsed_s / past
    } else {
        rest
    }
}

/// The line of phase `done + 1` of `total` named `label`, of the run `what`:
/// "bench ddos: phase 3/15 (fastpath, 1M pps): 2 done in 45 s, about 3 min 20 s left".
pub fn line(what: &str, label: &str, done: usize, total: usize, elapsed_s: f64, left_s: f64) -> String {
    format!(
        "{what}: phase {}/{total} ({label}): {done} done in {}, about {} left",
        done + 1,
        human_s(elapsed_s),
        human_s(left_s)
    )
}

/// The phases of one run, announced one by one on a sink.
pub struct Progress<'a> {
    what: String,
    planned_s: Vec<f64>,
    done: usize,
    start: Instant,
    sink: &'a mut dyn FnMut(&str),
}

impl<'a> Progress<'a> {
    /// The run `what` ("bench ddos"), its phases planned to take `planned_s` seconds each, in
    /// order, announced on `sink`; the clock starts now.
    pub fn new(what: &str, planned_s: Vec<f64>, sink: &'a mut dyn FnMut(&str)) -> Self {
        Self { what: what.to_string(), planned_s, done: 0, start: Instant::now(), sink }
    }

    /// Announces the next phase, `label` ("fastpath, 1M pps"); the one before it is done.
    pub fn phase(&mut self, label: &str) {
        let el = self.start.elapsed().as_secs_f64();
        let l = line(&self.what, label, self.done, self.planned_s.len(), el, left_s(&self.planned_s, self.done, el));
        (self.sink)(&l);
        self.done += 1;
    }

    /// Passes a line that is not a phase (a note) to the sink.
    pub fn note(&mut self, line: &str) {
        (self.sink)(line);
    }

    /// Announces the end: "bench ddos: 15 phases done in 5 min 02 s".
    pub fn finish(&mut self) {
        let l = format!("{}: {} phases done in {}", self.what, self.done, human_s(self.start.elapsed().as_secs_f64()));
        (self.sink)(&l);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The estimate: the plan before anything is done, then the plan left scaled by how the
    /// done phases kept to theirs; the line says which phase, what is done, and what is left.
    #[test]
    fn time_left_scales_the_plan_by_the_phases_done() {
        let plan = [10.0, 10.0, 20.0, 20.0];
        assert_eq!(left_s(&plan, 0, 0.0), 60.0);
        // Two phases planned at 20 s took 30 s: the 40 s left take 60.
        assert_eq!(left_s(&plan, 2, 30.0), 60.0);
        assert_eq!(left_s(&plan, 4, 99.0), 0.0);
        assert_eq!(left_s(&[0.0, 5.0], 1, 3.0), 5.0, "no plan to scale by: the plan as is");
        assert_eq!(
            line("bench ddos", "fastpath, 1M pps", 2, 15, 45.2, 200.0),
            "bench ddos: phase 3/15 (fastpath, 1M pps): 2 done in 45 s, about 3 min 20 s left"
        );
        assert_eq!(human_s(3725.0), "1 h 02 min");
        let mut lines = Vec::new();
        let mut sink = |l: &str| lines.push(l.to_string());
        let mut p = Progress::new("demo", vec![1.0, 1.0], &mut sink);
        p.phase("AF_XDP rxdrop");
        p.phase("XDP_DROP");
        p.finish();
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[0].starts_with("demo: phase 1/2 (AF_XDP rxdrop): 0 done in 0 s, about 2 s left"), "{lines:?}");
        assert!(lines[1].starts_with("demo: phase 2/2 (XDP_DROP): 1 done in 0 s, about "), "{lines:?}");
        assert_eq!(lines[2], "demo: 2 phases done in 0 s");
    }
}
