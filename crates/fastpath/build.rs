//! Compiles every `bpf/*.bpf.c` whose cargo feature is on ([`feature_of`]) into a libbpf
//! skeleton in OUT_DIR (never committed), and generates the Rust side of `bpf/include/fastpath_abi.h` with bindgen into
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
    let bpf_dir = manifest.join("bpf");
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
    // Every bpf/*.bpf.c is a program: adding a file is all it takes (no list to keep).
    println!("cargo:rerun-if-changed={}", bpf_dir.display());
    let mut names: Vec<String> = std::fs::read_dir(&bpf_dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", bpf_dir.display()))
        .filter_map(|e| e.ok()?.file_name().to_str()?.strip_suffix(".bpf.c").map(str::to_string))
        .collect();
    names.sort();
    let mut mods = String::new();
    let mut xdp_names = Vec::new();
    for name in &names {
        let src = bpf_dir.join(format!("{name}.bpf.c"));
        println!("cargo:rerun-if-changed={}", src.display());
        let text = std::fs::read_to_string(&src).unwrap_or_else(|e| panic!("reading {}: {e}", src.display()));
        // Every program's XDP names, built or not: `fastpath doctor` knows them all.
        xdp_names.extend(xdp_functions(&text));
        if let Some(feature) = feature_of(name) {
            // Cargo sets CARGO_FEATURE_<NAME> (upper case, '-' as '_') for each enabled feature.
            let var = format!("CARGO_FEATURE_{}", feature.to_uppercase().replace('-', "_"));
            if std::env::var_os(var).is_none() {
                continue;
            }
        }
        // -fno-strict-aliasing: the programs fill keys through their __u16/__u32 members and
        // then hash and compare them as __u64 words (classifier.bpf.c's table_find(), the flow
        // cache's key); without it the compiler may reorder those accesses. Each element is one
        // clang argument.
        SkeletonBuilder::new()
            .source(&src)
            .clang_args([include.as_str(), multiarch.as_str(), "-O2", "-Wall", "-fno-strict-aliasing"])
            .build_and_generate(out.join(format!("{name}.skel.rs")))
            .unwrap_or_else(|e| panic!("building BPF program {}: {e:#}", src.display()));
        mods += &format!("pub mod {name} {{\n    include!(concat!(env!(\"OUT_DIR\"), \"/{name}.skel.rs\"));\n}}\n");
    }
    std::fs::write(out.join("skeletons.rs"), mods).expect("writing skeletons.rs");
    // The kernel keeps a program's name in BPF_OBJ_NAME_LEN (16) bytes with the NUL: 15 at most.
    let kernel: Vec<String> = xdp_names.iter().map(|n| format!("{:?}", &n[..n.len().min(15)])).collect();
    std::fs::write(
        out.join("xdp_program_names.rs"),
        format!(
            "/// fastpath's XDP program names as the kernel keeps them (at most 15 bytes).\npub const XDP_PROGRAM_NAMES: [&str; {}] = [{}];\n",
            kernel.len(),
            kernel.join(", ")
        ),
    )
    .expect("writing xdp_program_names.rs");
}

/// The cargo feature (Cargo.toml `[features]`) without which `bpf/NAME.bpf.c` is not compiled;
/// None for the programs always built (`xsk_redirect`, `xsk_redirect_meta`, `xdp_drop`,
/// `xdp_gen`, `xdp_monitor`). A program of a gated Rust module must be listed here, or a
/// build without that feature compiles a program nothing loads.
fn feature_of(program: &str) -> Option<&'static str> {
    match program {
        "classifier" | "syncookie_tc" => Some("classifier"),
        "xdp_capture" => Some("capture"),
        "xdp_redirect_cpu" => Some("cpumap"),
        "xdp_replay" => Some("replay"),
        "xdp_fwd" => Some("fwd"),
        _ => None,
    }
}

/// The function names of a BPF source's XDP programs that attach to an interface: each
/// `SEC("xdp")` or `SEC("xdp.frags")` line followed by `int NAME(struct xdp_md *ctx)` (not
/// `xdp/cpumap` or `xdp/devmap` programs, which run in a map's entries, never on an interface).
fn xdp_functions(text: &str) -> Vec<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let l = l.trim();
        if l != "SEC(\"xdp\")" && l != "SEC(\"xdp.frags\")" {
            continue;
        }
        let def = lines.get(i + 1).copied().unwrap_or("");
        let name = def.strip_prefix("int ").and_then(|r| r.split('(').next()).map(str::trim);
        match name {
            Some(n) if !n.is_empty() && def.contains("struct xdp_md") => out.push(n.to_string()),
            _ => panic!("an XDP program's SEC line is not followed by `int NAME(struct xdp_md *ctx)`: {def:?}"),
        }
    }
    out
}
