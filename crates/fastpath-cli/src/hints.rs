//! The commands a run prints for the user to type next (hints), made to act where this run
//! did: its `--netns`, fastpath's pinned classifier, the namespaces where an interface exists.
//! Depends on no other module of the CLI (error.rs and common.rs both use it).

/// The `--netns` this run entered last ([`crate::common::enter_ns`]), for the commands it prints.
static ENTERED_NS: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// ` --netns NS` when this run entered network namespace NS with `--netns`, else empty: what a
/// printed `fastpath ... -i IF` command needs to act where this one did.
pub fn netns_flag() -> String {
    ENTERED_NS.lock().unwrap_or_else(|e| e.into_inner()).as_ref().map(|ns| format!(" --netns {ns}")).unwrap_or_default()
}

/// `text` (a hint holding `ip link ...` or `ethtool ...` commands) with each of those
/// commands made to act in network namespace `ns`, if given: `ip -n NS link ...`,
/// `ip netns exec NS ethtool ...`.
fn commands_in(text: &str, ns: Option<&str>) -> String {
    match ns {
        None => text.to_string(),
        Some(ns) => text
            .replace("ip link ", &format!("ip -n {ns} link "))
            .replace("ethtool ", &format!("ip netns exec {ns} ethtool ")),
    }
}

/// [`commands_in`] the namespace this run entered with `--netns` ([`crate::common::enter_ns`]).
pub fn in_entered_ns(text: &str) -> String {
    commands_in(text, ENTERED_NS.lock().unwrap_or_else(|e| e.into_inner()).as_deref())
}

/// Where else an interface named `iface` exists, for an error saying it is not in this network
/// namespace: "; an interface named IF exists in network namespace NS (--netns NS)", naming
/// each namespace (the default one, those under /var/run/netns) that has one; empty if none.
pub fn iface_elsewhere(iface: &str) -> String {
    let name = iface.to_string();
    let found = fastpath_testbed::netns_where(move || fastpath::netdev::Iface::resolve(&name).is_ok());
    if found.is_empty() {
        return String::new();
    }
    let list: Vec<String> = found
        .iter()
        .map(|w| match w {
            fastpath_testbed::NetnsWhere::Default => "the default network namespace (without --netns)".to_string(),
            fastpath_testbed::NetnsWhere::Named(n) => format!("network namespace {n} (--netns {n})"),
        })
        .collect();
    format!("; an interface named {iface} exists in {}", list.join(" and in "))
}

/// The commands that change or remove fastpath's classifier pinned on `iface` (in the
/// namespace this run entered).
pub fn pinned_hint(iface: &str) -> String {
    let ns = netns_flag();
    format!(
        "`fastpath filter reload FILE -i {iface}{ns}` changes its rules, `fastpath filter load FILE -i {iface}{ns} --pin` takes it over (no gap), `fastpath filter unload -i {iface}{ns}` removes it"
    )
}

/// Keeps `ns` as the namespace this run entered (`crate::common::enter_ns`).
pub fn set_entered_ns(ns: &str) {
    *ENTERED_NS.lock().unwrap_or_else(|e| e.into_inner()) = Some(ns.to_string());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A hint's `ip link` and `ethtool` commands act in the namespace given with --netns.
    #[test]
    fn hint_commands_carry_the_namespace() {
        let fix = "remove it (ip link set dev v0 xdp off; xdpgeneric off), or ethtool -K v0 gro on";
        assert_eq!(commands_in(fix, None), fix);
        assert_eq!(
            commands_in(fix, Some("blue")),
            "remove it (ip -n blue link set dev v0 xdp off; xdpgeneric off), or ip netns exec blue ethtool -K v0 gro on"
        );
    }
}
