//! Compiles every `bpf/*.bpf.c` into a libbpf skeleton in OUT_DIR (never committed).
use std::path::PathBuf;

use libbpf_cargo::SkeletonBuilder;

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // Debian keeps asm/types.h under the multiarch directory; -target bpf does not look there.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    let include = format!("-I{}", bpf_dir.join("include").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("include/fastpath_abi.h").display());
    for name in ["xsk_redirect", "xdp_drop", "xdp_gen", "classifier", "xdp_monitor", "xdp_redirect_cpu"] {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        SkeletonBuilder::new()
            .source(&src)
            .clang_args([include.as_str(), multiarch.as_str(), "-O2", "-Wall"])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", src.display()));
    }
}
