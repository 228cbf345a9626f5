//! Links the programs with packed relative relocations (`DT_RELR`) where
//! the toolchain and the C library can.
//!
//! The binaries are position independent, and most of their dynamic
//! relocations are relative ones (every pointer in a vtable or a static
//! table). As `.rela.dyn` entries they take 24 bytes each: 370 kB in the
//! router, 185 kB in each pane logger, read once at start and then kept
//! mapped for nothing. Packed (`-z pack-relative-relocs`, binutils 2.38 and
//! glibc 2.36, both in Debian 12) they take under 10 kB, and the loader has
//! less to read at every start of a logger.
//!
//! The linker marks such a binary as needing glibc's `GLIBC_ABI_DT_RELR`,
//! so one built where glibc is older would not start. The flag is therefore
//! tried first: a small C program is linked with it and run. If that fails
//! (an older toolchain or glibc, another C library, a cross build), the
//! programs are linked as before.

use std::path::Path;
use std::process::{Command, Stdio};

const FLAG: &str = "-Wl,-z,pack-relative-relocs";

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-env-changed=CC");
    let Some(out) = std::env::var_os("OUT_DIR") else { return };
    if native() && links_and_runs(Path::new(&out)) {
        println!("cargo::rustc-link-arg-bins={FLAG}");
    }
}

/// Whether the programs are built for the machine that builds them (only
/// then can the probe be run).
fn native() -> bool {
    let target = std::env::var("TARGET").unwrap_or_default();
    let host = std::env::var("HOST").unwrap_or_default();
    !target.is_empty() && target == host && target.ends_with("-linux-gnu")
}

/// Whether a program linked with [`FLAG`] by the C compiler (the linker
/// rustc drives on this target) builds and starts.
fn links_and_runs(out: &Path) -> bool {
    let source = out.join("relr-probe.c");
    let program = out.join("relr-probe");
    // A static pointer, so the program has a relative relocation to pack.
    let text = "static const char *p = \"x\";\nint main(void) { return p[0] != 'x'; }\n";
    if std::fs::write(&source, text).is_err() {
        return false;
    }
    let cc = std::env::var_os("CC").unwrap_or_else(|| "cc".into());
    let linked = Command::new(cc)
        .args(["-pie", "-fPIE", FLAG, "-o"])
        .arg(&program)
        .arg(&source)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    linked && Command::new(&program).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}
