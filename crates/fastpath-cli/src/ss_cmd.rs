//! `fastpath ss`: every AF_XDP socket of a network namespace (`fastpath::xsk::diag`).

use fastpath::xsk::diag;
use serde_json::json;

use crate::args::SsArgs;
use crate::common::enter_ns;
use crate::error::{kernel, CliResult};

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map(|x| x.to_string()).unwrap_or_else(|| "-".into())
}

/// `fastpath ss`.
pub fn run(a: &SsArgs) -> CliResult<()> {
    enter_ns(&a.netns)?;
    let l = diag::list().map_err(kernel)?;
    if a.json {
        println!("{}", json!({"type": "xsk_sockets", "source": l.source, "note": l.note, "sockets": l.sockets}));
        return Ok(());
    }
    if let Some(n) = &l.note {
        eprintln!("fastpath ss: {n}");
    }
    println!(
        "{:>10} {:>8} {:<16} {:>4} {:<12} {:>6} {:>6} {:>6} {:>6}  {:<28} statistics",
        "inode", "pid", "process", "fd", "if:queue", "rx", "tx", "fill", "comp", "umem"
    );
    for s in &l.sockets {
        let ifq = match (s.ifindex, s.queue_id) {
            (Some(i), Some(q)) => {
                let name = fastpath::netdev::NetDev::all()
                    .ok()
                    .and_then(|all| all.into_iter().find(|d| d.ifindex == i).map(|d| d.name));
                format!("{}:{q}", name.unwrap_or_else(|| i.to_string()))
            }
            _ => "-".into(),
        };
        let umem = match &s.umem {
            Some(u) => format!(
                "id {} {} B x{} {}",
                u.id,
                u.chunk_size,
                u.size_bytes / u.chunk_size.max(1) as u64,
                if u.zero_copy { "zc" } else { "copy" }
            ),
            None => match s.zero_copy {
                Some(true) => "zero-copy".into(),
                Some(false) => "copy".into(),
                None => "-".into(),
            },
        };
        let stats = s
            .stats
            .map(|st| {
                st.fields()
                    .iter()
                    .filter(|(_, v)| *v > 0)
                    .map(|(k, v)| format!("{k}={v}"))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .unwrap_or_default();
        println!(
            "{:>10} {:>8} {:<16} {:>4} {:<12} {:>6} {:>6} {:>6} {:>6}  {:<28} {}",
            s.inode,
            opt(s.pid),
            s.comm.clone().unwrap_or_else(|| "-".into()),
            opt(s.fd),
            ifq,
            opt(s.rx_ring),
            opt(s.tx_ring),
            opt(s.fill_ring),
            opt(s.comp_ring),
            umem,
            if stats.is_empty() { "0".into() } else { stats }
        );
    }
    Ok(())
}
