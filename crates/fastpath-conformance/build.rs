//! Compiles `bpf/xsk_progs.bpf.c` (the scenarios' own XDP programs) into a libbpf skeleton in
//! OUT_DIR, as crates/fastpath/build.rs does for the engine's programs.
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // Debian keeps asm/types.h under the multiarch directory; -target bpf does not look there.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    let src = manifest.join("bpf/xsk_progs.bpf.c");
    println!("cargo:rerun-if-changed={}", src.display());
    SkeletonBuilder::new()
        .source(&src)
        .clang_args([multiarch.as_str(), "-O2", "-Wall"])
        .build_and_generate(out.join("xsk_progs.skel.rs"))
        .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", src.display()));
}
