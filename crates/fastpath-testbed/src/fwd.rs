//! The [`FwdBed`] guard: three namespaces, a forwarder between two hosts.
//!
//! ```text
//!  <name>-a                      <name>-f (forwarder)                       <name>-b
//!  <name>a 10.99.1.1/24 <=veth=> <name>fa 10.99.1.254/24
//!          fd99:0:0:1::1/64               fd99:0:0:1::fe/64
//!                                <name>fb 10.99.2.254/24  <=veth=> <name>b 10.99.2.1/24
//!                                         fd99:0:0:2::fe/64                fd99:0:0:2::1/64
//! ```
//!
//! a and b route everything through f (default routes via .254 / ::fe); f has IPv4 and IPv6
//! forwarding on, so the kernel itself forwards until a forwarder is attached. Neighbour
//! entries are permanent on every link (no ARP / neighbour discovery), IPv6 skips DAD, GRO is
//! on at all four ends (a veth takes XDP-redirected frames only then, see the crate docs), TX
//! checksum offload is off at the host ends (their frames carry complete checksums, as from a
//! wire).

use std::net::{Ipv4Addr, Ipv6Addr};

use serde::Serialize;

use crate::bed::Rollback;
use crate::name::validate_name;
use crate::netns::netns_exists;
use crate::{cmd, TestbedError};

/// Host a's IPv4 address.
pub const FWD_IP4_A: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 1);
/// The forwarder's address on a's link.
pub const FWD_IP4_FA: Ipv4Addr = Ipv4Addr::new(10, 99, 1, 254);
/// The forwarder's address on b's link.
pub const FWD_IP4_FB: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 254);
/// Host b's IPv4 address.
pub const FWD_IP4_B: Ipv4Addr = Ipv4Addr::new(10, 99, 2, 1);
/// Host a's IPv6 address.
pub const FWD_IP6_A: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 1, 0, 0, 0, 1);
/// The forwarder's IPv6 address on a's link.
pub const FWD_IP6_FA: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 1, 0, 0, 0, 0xfe);
/// The forwarder's IPv6 address on b's link.
pub const FWD_IP6_FB: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 2, 0, 0, 0, 0xfe);
/// Host b's IPv6 address.
pub const FWD_IP6_B: Ipv6Addr = Ipv6Addr::new(0xfd99, 0, 0, 2, 0, 0, 0, 1);

/// Everything a user of a forwarding test bed needs, ready for JSON.
#[derive(Serialize, Debug, Clone, PartialEq, Eq)]
pub struct FwdBedInfo {
    /// Test bed name.
    pub name: String,
    /// Host a's namespace, `<name>-a`.
    pub ns_a: String,
    /// The forwarder's namespace, `<name>-f`.
    pub ns_f: String,
    /// Host b's namespace, `<name>-b`.
    pub ns_b: String,
    /// Host a's interface, `<name>a`.
    pub iface_a: String,
    /// The forwarder's port towards a, `<name>fa`.
    pub iface_fa: String,
    /// The forwarder's port towards b, `<name>fb`.
    pub iface_fb: String,
    /// Host b's interface, `<name>b`.
    pub iface_b: String,
    /// MACs, `aa:bb:cc:dd:ee:ff`.
    pub mac_a: String,
    /// MAC of `iface_fa`.
    pub mac_fa: String,
    /// MAC of `iface_fb`.
    pub mac_fb: String,
    /// MAC of `iface_b`.
    pub mac_b: String,
    /// Addresses.
    pub ip4_a: Ipv4Addr,
    /// IPv4 of `iface_fa`.
    pub ip4_fa: Ipv4Addr,
    /// IPv4 of `iface_fb`.
    pub ip4_fb: Ipv4Addr,
    /// IPv4 of `iface_b`.
    pub ip4_b: Ipv4Addr,
    /// IPv6 of `iface_a`.
    pub ip6_a: Ipv6Addr,
    /// IPv6 of `iface_fa`.
    pub ip6_fa: Ipv6Addr,
    /// IPv6 of `iface_fb`.
    pub ip6_fb: Ipv6Addr,
    /// IPv6 of `iface_b`.
    pub ip6_b: Ipv6Addr,
}

/// A forwarding test bed (see the module docs). Deleted on drop (all three namespaces, which
/// destroys both veth pairs). Needs root.
#[derive(Debug)]
pub struct FwdBed {
    info: FwdBedInfo,
    owned: bool,
}

fn mac_of(ns: &str, iface: &str) -> Result<String, TestbedError> {
    let args = ["-n", ns, "-o", "link", "show", "dev", iface];
    let out = cmd::run("ip", &args)?;
    let tokens: Vec<&str> = out.split_whitespace().collect();
    tokens.iter().position(|t| *t == "link/ether").and_then(|i| tokens.get(i + 1)).map(|s| s.to_string()).ok_or_else(
        || TestbedError::Parse { cmd: format!("ip {}", args.join(" ")), detail: "no `link/ether <mac>`".into() },
    )
}

/// Addresses (IPv6 without DAD, no router advertisements), link up, GRO on. On a host end also
/// TX checksum offload off: the hosts' frames then carry complete checksums, as frames from a
/// wire do. (With it on, a veth hands over CHECKSUM_PARTIAL skbs; an XDP program that forwards
/// such a frame as raw bytes sends it on with the checksum unfinished.)
fn end_up(ns: &str, iface: &str, ip4: Ipv4Addr, ip6: Ipv6Addr) -> Result<(), TestbedError> {
    cmd::write_in(ns, &format!("/proc/sys/net/ipv6/conf/{iface}/accept_ra"), "0")?;
    cmd::run("ip", &["-n", ns, "addr", "add", &format!("{ip4}/24"), "dev", iface])?;
    cmd::run("ip", &["-n", ns, "addr", "add", &format!("{ip6}/64"), "dev", iface, "nodad"])?;
    cmd::run("ip", &["-n", ns, "link", "set", "dev", iface, "up"])?;
    cmd::run_in(ns, "ethtool", &["-K", iface, "gro", "on"])?;
    if !ns.ends_with("-f") {
        cmd::run_in(ns, "ethtool", &["-K", iface, "tx", "off"])?;
    }
    Ok(())
}

/// A host's default routes via the forwarder, and permanent neighbour entries both ways on
/// their link (`gw`: the forwarder's addresses there, `host`: the host's).
#[allow(clippy::too_many_arguments)]
fn host_routes(
    ns_host: &str,
    i_host: &str,
    ns_f: &str,
    i_f: &str,
    mac_f: &str,
    mac_host: &str,
    gw: (Ipv4Addr, Ipv6Addr),
    host: (Ipv4Addr, Ipv6Addr),
) -> Result<(), TestbedError> {
    cmd::ip(&format!("-n {ns_host} route add default via {}", gw.0))?;
    cmd::ip(&format!("-n {ns_host} -6 route add default via {}", gw.1))?;
    for (ns, iface, mac, (ip4, ip6)) in [(ns_host, i_host, mac_f, gw), (ns_f, i_f, mac_host, host)] {
        for ip in [ip4.to_string(), ip6.to_string()] {
            cmd::ip(&format!("-n {ns} neigh replace {ip} lladdr {mac} dev {iface} nud permanent"))?;
        }
    }
    Ok(())
}

impl FwdBed {
    /// Builds the test bed named `name` (1 to 12 ASCII letters or digits; `None`: a unique
    /// name). On failure part-way everything created is removed.
    ///
    /// # Errors
    ///
    /// [`TestbedError::InvalidName`] for a bad `name`, before anything is created;
    /// [`TestbedError::NeedsRoot`] without root (CAP_SYS_ADMIN and CAP_NET_ADMIN);
    /// [`TestbedError::Command`] naming the `ip` / `sh` command that failed (e.g. a namespace of
    /// that name already exists); [`TestbedError::Spawn`] if one cannot be started.
    pub fn up(name: Option<&str>) -> Result<FwdBed, TestbedError> {
        let name = match name {
            Some(n) => {
                validate_name(n)?;
                n.to_string()
            }
            None => crate::bed::default_name(),
        };
        let (ns_a, ns_f, ns_b) = (format!("{name}-a"), format!("{name}-f"), format!("{name}-b"));
        let (ia, ifa, ifb, ib) = (format!("{name}a"), format!("{name}fa"), format!("{name}fb"), format!("{name}b"));
        let mut rollback = Rollback(Vec::new());
        for ns in [&ns_a, &ns_f, &ns_b] {
            crate::bed::netns_add(ns)?;
            rollback.0.push(ns.clone());
            cmd::run("ip", &["-n", ns, "link", "set", "lo", "up"])?;
        }
        cmd::ip(&format!("-n {ns_a} link add {ia} type veth peer name {ifa} netns {ns_f}"))?;
        cmd::ip(&format!("-n {ns_b} link add {ib} type veth peer name {ifb} netns {ns_f}"))?;
        let ends = [
            (&ns_a, &ia, FWD_IP4_A, FWD_IP6_A),
            (&ns_f, &ifa, FWD_IP4_FA, FWD_IP6_FA),
            (&ns_f, &ifb, FWD_IP4_FB, FWD_IP6_FB),
            (&ns_b, &ib, FWD_IP4_B, FWD_IP6_B),
        ];
        for (ns, iface, ip4, ip6) in ends {
            end_up(ns, iface, ip4, ip6)?;
        }
        cmd::write_in(&ns_f, "/proc/sys/net/ipv4/ip_forward", "1")?;
        cmd::write_in(&ns_f, "/proc/sys/net/ipv6/conf/all/forwarding", "1")?;
        let macs: Vec<String> = ends.iter().map(|(ns, iface, _, _)| mac_of(ns, iface)).collect::<Result<_, _>>()?;
        host_routes(&ns_a, &ia, &ns_f, &ifa, &macs[1], &macs[0], (FWD_IP4_FA, FWD_IP6_FA), (FWD_IP4_A, FWD_IP6_A))?;
        host_routes(&ns_b, &ib, &ns_f, &ifb, &macs[2], &macs[3], (FWD_IP4_FB, FWD_IP6_FB), (FWD_IP4_B, FWD_IP6_B))?;
        rollback.0.clear();
        Ok(FwdBed {
            info: FwdBedInfo {
                name,
                ns_a,
                ns_f,
                ns_b,
                iface_a: ia,
                iface_fa: ifa,
                iface_fb: ifb,
                iface_b: ib,
                mac_a: macs[0].clone(),
                mac_fa: macs[1].clone(),
                mac_fb: macs[2].clone(),
                mac_b: macs[3].clone(),
                ip4_a: FWD_IP4_A,
                ip4_fa: FWD_IP4_FA,
                ip4_fb: FWD_IP4_FB,
                ip4_b: FWD_IP4_B,
                ip6_a: FWD_IP6_A,
                ip6_fa: FWD_IP6_FA,
                ip6_fb: FWD_IP6_FB,
                ip6_b: FWD_IP6_B,
            },
            owned: true,
        })
    }

    /// Deletes the link between the forwarder and host b (both ends go with the veth pair) and
    /// makes it again as it was: same names, MACs, addresses, routes and neighbours, new
    /// ifindexes. For the tests of a forwarder following a deleted and recreated port.
    ///
    /// # Errors
    ///
    /// [`TestbedError::Command`] / [`TestbedError::NeedsRoot`] / [`TestbedError::Spawn`] naming the
    /// `ip` command that failed, as [`FwdBed::link_b_again`]; a failure part-way leaves the link as
    /// far as it got.
    pub fn relink_b(&self) -> Result<(), TestbedError> {
        let i = &self.info;
        cmd::ip(&format!("-n {} link del {}", i.ns_f, i.iface_fb))?;
        self.link_b_again()
    }

    /// The second half of [`FwdBed::relink_b`]: makes the link to b again after it was deleted.
    ///
    /// # Errors
    ///
    /// [`TestbedError::Command`] naming the `ip` command that failed (e.g. EEXIST if the link was
    /// not deleted), [`TestbedError::NeedsRoot`] without CAP_NET_ADMIN, [`TestbedError::Spawn`]
    /// without `ip`.
    pub fn link_b_again(&self) -> Result<(), TestbedError> {
        let i = &self.info;
        cmd::ip(&format!(
            "-n {} link add {} address {} type veth peer name {} address {} netns {}",
            i.ns_b, i.iface_b, i.mac_b, i.iface_fb, i.mac_fb, i.ns_f
        ))?;
        end_up(&i.ns_f, &i.iface_fb, i.ip4_fb, i.ip6_fb)?;
        end_up(&i.ns_b, &i.iface_b, i.ip4_b, i.ip6_b)?;
        host_routes(
            &i.ns_b,
            &i.iface_b,
            &i.ns_f,
            &i.iface_fb,
            &i.mac_fb,
            &i.mac_b,
            (i.ip4_fb, i.ip6_fb),
            (i.ip4_b, i.ip6_b),
        )
    }

    /// Whether a forwarding test bed of this name exists (its `<name>-f` namespace).
    pub fn exists(name: &str) -> bool {
        netns_exists(&format!("{name}-f"))
    }

    /// Names, interfaces, MACs and addresses.
    pub fn info(&self) -> &FwdBedInfo {
        &self.info
    }

    /// Keeps the test bed after this guard is dropped (for `fastpath testbed up --fwd`).
    pub fn keep(mut self) -> FwdBedInfo {
        self.owned = false;
        self.info.clone()
    }

    /// Deletes the three namespaces of test bed `name` (those that exist).
    ///
    /// # Errors
    ///
    /// [`TestbedError::InvalidName`] for a bad `name`; else the first failure of `ip netns del`
    /// ([`TestbedError::Command`], [`TestbedError::NeedsRoot`], [`TestbedError::Spawn`]), after all
    /// three were attempted.
    pub fn down_by_name(name: &str) -> Result<(), TestbedError> {
        validate_name(name)?;
        let mut first_err = None;
        for s in ["a", "f", "b"] {
            if let Err(e) = crate::bed::del_netns(&format!("{name}-{s}")) {
                first_err.get_or_insert(e);
            }
        }
        first_err.map_or(Ok(()), Err)
    }
}

impl Drop for FwdBed {
    fn drop(&mut self) {
        if self.owned {
            if let Err(e) = FwdBed::down_by_name(&self.info.name) {
                eprintln!("fastpath-testbed: tearing down {}: {e}", self.info.name);
            }
        }
    }
}
