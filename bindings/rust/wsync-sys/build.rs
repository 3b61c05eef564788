//! Finds libwsync and nothing else (the declarations are checked in, see tests/layout.rs):
//! WSYNC_LIB_DIR (the folder holding libwsync.so) when set, else `pkg-config --libs wsync`.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=WSYNC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG");
    if let Some(dir) = env::var_os("WSYNC_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=wsync");
        println!("cargo:lib_dir={}", dir);
        return;
    }
    let pkg_config = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let out = Command::new(&pkg_config).args(["--libs", "wsync"]).output();
    let libs = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => panic!(
            "wsync-sys: `{} --libs wsync` failed ({}): install wsync (cmake --install puts wsync.pc in \
             <prefix>/lib/pkgconfig; add that folder to PKG_CONFIG_PATH) or set WSYNC_LIB_DIR to the \
             folder holding libwsync.so",
            pkg_config,
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => panic!(
            "wsync-sys: cannot run `{}` ({}): install pkg-config or set WSYNC_LIB_DIR to the folder \
             holding libwsync.so",
            pkg_config, e
        ),
    };
    let mut linked = false;
    for flag in libs.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:lib_dir={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={}", lib);
            linked |= lib == "wsync";
        }
    }
    if !linked {
        println!("cargo:rustc-link-lib=dylib=wsync");
    }
}
