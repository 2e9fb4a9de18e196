//! Compiles every `bpf/*.bpf.c` into a libbpf skeleton in OUT_DIR (never committed), and
//! generates the Rust side of `bpf/include/fastpath_abi.h` with bindgen into
//! OUT_DIR/fastpath_abi.rs (see `src/abi.rs` for why bindgen and not the skeleton's types).
use std::path::{Path, PathBuf};

use libbpf_cargo::SkeletonBuilder;

/// Adds `bytemuck::Pod` and `bytemuck::Zeroable` to every generated struct (`Zeroable` only to
/// unions): the `Pod` derive refuses to compile a struct with implicit padding, so a hole in the C layout is a build error.
#[derive(Debug)]
struct PodDerives;

impl bindgen::callbacks::ParseCallbacks for PodDerives {
    fn add_derives(&self, info: &bindgen::callbacks::DeriveInfo<'_>) -> Vec<String> {
        match info.kind {
            bindgen::callbacks::TypeKind::Struct => vec!["bytemuck::Pod".into(), "bytemuck::Zeroable".into()],
            // bytemuck cannot derive Pod for a union: src/abi.rs implements it by hand.
            bindgen::callbacks::TypeKind::Union => vec!["bytemuck::Zeroable".into()],
            _ => vec![],
        }
    }
}

fn abi_bindings(header: &Path, clang_args: &[&str], out: &Path) {
    bindgen::Builder::default()
        .header(header.to_string_lossy())
        .clang_args(clang_args)
        .allowlist_type("fp_.*")
        .allowlist_var("FP_.*")
        // UAPI values of the kernel's CPUMAP and DEVMAP (include/uapi/linux/bpf.h).
        .allowlist_type("bpf_cpumap_val")
        .allowlist_type("bpf_devmap_val")
        .default_macro_constant_type(bindgen::MacroTypeVariation::Unsigned)
        .derive_default(true)
        .derive_debug(true)
        .layout_tests(false) // src/abi.rs checks sizes at compile time instead
        .parse_callbacks(Box::new(PodDerives))
        .generate()
        .unwrap_or_else(|e| {
            panic!("bindgen over {}: {e} (is libclang-dev installed? scripts/deps.sh)", header.display())
        })
        .write_to_file(out)
        .unwrap_or_else(|e| panic!("writing {}: {e}", out.display()));
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let bpf_dir = manifest.join("../../bpf");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    // Debian keeps asm/types.h under the multiarch directory; -target bpf does not look there.
    let arch = std::env::var("CARGO_CFG_TARGET_ARCH").unwrap_or_else(|_| "x86_64".into());
    let multiarch = format!("-I/usr/include/{arch}-linux-gnu");
    let include = format!("-I{}", bpf_dir.join("include").display());
    let abi_h = bpf_dir.join("include/fastpath_abi.h");
    println!("cargo:rerun-if-changed={}", abi_h.display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("include/fastpath_kernel.h").display());
    println!("cargo:rerun-if-changed={}", bpf_dir.join("include/fastpath_capture.h").display());
    abi_bindings(&abi_h, &[include.as_str(), multiarch.as_str()], &out.join("fastpath_abi.rs"));
    for name in [
        "xsk_redirect",
        "xdp_drop",
        "xdp_gen",
        "classifier",
        "xdp_monitor",
        "xdp_redirect_cpu",
        "xdp_fwd",
        "xdp_capture",
    ] {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        SkeletonBuilder::new()
            .source(&src)
            .clang_args([include.as_str(), multiarch.as_str(), "-O2", "-Wall"])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", src.display()));
    }
}
