//! Compiles the samples' shared synthetic model (samples/common/synthetic_model.c, the C
//! trainer's) into this program, so that the bytes are the ones the C++ engines check. Uses $CC
//! (default `cc`) and `ar`; the header comes from WSYNC_INCLUDE_DIR, pkg-config, or this repository.
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn run(cmd: &mut Command) {
    let status = cmd.status().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(status.success(), "{cmd:?} failed");
}

fn include_dir(manifest: &Path) -> PathBuf {
    if let Some(d) = env::var_os("WSYNC_INCLUDE_DIR") {
        return PathBuf::from(d);
    }
    if let Ok(o) = Command::new("pkg-config").args(["--cflags-only-I", "wsync"]).output() {
        let flags = String::from_utf8_lossy(&o.stdout).into_owned();
        if let Some(dir) = flags.split_whitespace().find_map(|f| f.strip_prefix("-I")) {
            return PathBuf::from(dir);
        }
    }
    manifest.join("../../../include")
}

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out = PathBuf::from(env::var("OUT_DIR").unwrap());
    let src = manifest.join("../../common/synthetic_model.c");
    println!("cargo:rerun-if-changed={}", src.display());
    println!("cargo:rerun-if-env-changed=WSYNC_INCLUDE_DIR");
    let obj = out.join("synthetic_model.o");
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    run(Command::new(cc)
        .args(["-O2", "-fPIC", "-std=c99", "-c"])
        .arg("-I")
        .arg(include_dir(&manifest))
        .arg(&src)
        .arg("-o")
        .arg(&obj));
    run(Command::new("ar").arg("crs").arg(out.join("libsynthetic_model.a")).arg(&obj));
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=synthetic_model");
    println!("cargo:rustc-link-lib=dylib=xxhash");
}
