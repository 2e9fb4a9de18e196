//! `fastpath testbed up|down|info`.

use anyhow::anyhow;
use fastpath_testbed::{FwdBed, Testbed, TestbedConfig};

use crate::args::TestbedCmd;
use crate::error::{require_privileges, usage, CliResult};

pub fn run(cmd: &TestbedCmd) -> CliResult<()> {
    require_privileges("testbed")?;
    match cmd {
        TestbedCmd::Up { name, fwd: true, json, .. } => {
            let info = FwdBed::up(name.as_deref())?.keep();
            if *json {
                println!("{}", serde_json::to_string(&info).unwrap_or_default());
            } else {
                println!("forwarding test bed {}", info.name);
                for (role, ns, iface, mac, ip4, ip6) in [
                    ("host a", &info.ns_a, &info.iface_a, &info.mac_a, info.ip4_a, info.ip6_a),
                    ("fwd -> a", &info.ns_f, &info.iface_fa, &info.mac_fa, info.ip4_fa, info.ip6_fa),
                    ("fwd -> b", &info.ns_f, &info.iface_fb, &info.mac_fb, info.ip4_fb, info.ip6_fb),
                    ("host b", &info.ns_b, &info.iface_b, &info.mac_b, info.ip4_b, info.ip6_b),
                ] {
                    println!("  {role:<9} netns {ns:<12} iface {iface:<14} {mac}  {ip4}/24  {ip6}/64");
                }
                println!("  e.g.  fastpath fwd --netns {} -i {} -i {}", info.ns_f, info.iface_fa, info.iface_fb);
            }
            Ok(())
        }
        TestbedCmd::Up { name, queues, napi_cpu, sender_qdisc, json, .. } => {
            if let Some(cpu) = napi_cpu {
                let n = fastpath::workers::online_cpus();
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
        TestbedCmd::Down { name } if FwdBed::exists(name) => Ok(FwdBed::down_by_name(name)?),
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
