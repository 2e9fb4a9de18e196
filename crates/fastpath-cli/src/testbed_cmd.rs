//! `fastpath testbed up|down|info`.

use anyhow::anyhow;
use fastpath_testbed::{Testbed, TestbedConfig};

use crate::args::TestbedCmd;
use crate::error::{require_privileges, usage, CliResult};

pub fn run(cmd: &TestbedCmd) -> CliResult<()> {
    require_privileges("testbed")?;
    match cmd {
        TestbedCmd::Up { name, queues, napi_cpu, sender_qdisc, json } => {
            if let Some(cpu) = napi_cpu {
                let n = fastpath::host::online_cpus();
                if *cpu >= n {
                    return Err(usage(anyhow!(
                        "--napi-cpu {cpu} is not accepted: this machine has CPUs 0..={}",
                        n - 1
                    )));
                }
            }
            let cfg = TestbedConfig { name: name.clone(), queues: *queues, sender_qdisc: *sender_qdisc, ipv6: true };
            let bed = Testbed::up(&cfg)?;
            if let Some(cpu) = napi_cpu {
                bed.set_rx_napi_cpu(Some(*cpu))?; // on error the guard removes the bed
            }
            print_info(&bed, *json);
            // Stays until `testbed down`.
            let _ = bed.owned(false);
            Ok(())
        }
        TestbedCmd::Down { name } => {
            let bed = Testbed::open(name)?;
            bed.down()?;
            Ok(())
        }
        TestbedCmd::Info { name: Some(name), json } => {
            let bed = Testbed::open(name)?;
            print_info(&bed, *json);
            Ok(())
        }
        TestbedCmd::Info { name: None, json } => {
            let all = fastpath_testbed::list()?;
            if *json {
                println!("{}", serde_json::json!({"testbeds": all}));
            } else if all.is_empty() {
                println!("no test beds");
            } else {
                all.iter().for_each(|n| println!("{n}"));
            }
            Ok(())
        }
    }
}

fn print_info(bed: &Testbed, json: bool) {
    let i = bed.info();
    if json {
        println!("{}", serde_json::to_string(&i).unwrap_or_default());
        return;
    }
    println!("test bed {}  ({} queue(s) per veth end)", i.name, i.queues);
    println!("  sender    netns {:<12} iface {:<14} {}  {}/24  {}/64", i.ns_a, i.iface_a, i.mac_a, i.ip4_a, i.ip6_a);
    println!("  receiver  netns {:<12} iface {:<14} {}  {}/24  {}/64", i.ns_b, i.iface_b, i.mac_b, i.ip4_b, i.ip6_b);
    println!("  e.g.  fastpath bench rxdrop --netns {} -i {}", i.ns_b, i.iface_b);
    println!("        fastpath gen --netns {} -i {} --dst-mac {}", i.ns_a, i.iface_a, i.mac_b);
}
