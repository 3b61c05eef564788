//! The hand-written declarations against include/wsync.h: a C program compiled against the header
//! prints every struct's size and field offsets, the STRUCT_SIZE macros and every constant; this
//! test compares them with the Rust side, and the header's function list with ours.
//! The header is found at WSYNC_INCLUDE_DIR, else `pkg-config --cflags wsync`, else in this
//! repository (../../../include). The compiler is $CC, else `cc`.
use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::mem::{size_of, MaybeUninit};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::ptr::addr_of;
use wsync_sys::*;

/// (struct, field or "", offset or size): "" is the struct's size; "FIELD.size" a field's size.
type Layout = Vec<(String, String, usize)>;

fn size_of_pointee<T>(_: *const T) -> usize {
    size_of::<T>()
}

macro_rules! layout {
    ($out:ident, $ty:ident { $($field:ident),* $(,)? }) => {{
        $out.push((stringify!($ty).to_string(), String::new(), size_of::<$ty>()));
        let u = MaybeUninit::<$ty>::uninit();
        let base = u.as_ptr() as usize;
        $(
            // SAFETY: addr_of! on a field of an uninitialised value only computes an address.
            let at = unsafe { addr_of!((*u.as_ptr()).$field) } as usize;
            $out.push((stringify!($ty).to_string(), stringify!($field).to_string(), at - base));
            // SAFETY: as above.
            let size = size_of_pointee(unsafe { addr_of!((*u.as_ptr()).$field) });
            $out.push((stringify!($ty).to_string(), concat!(stringify!($field), ".size").to_string(), size));
        )*
    }};
}

fn rust_layout() -> Layout {
    let mut v = Layout::new();
    layout!(v, wsync_option_t { struct_size, reserved0, key, value });
    layout!(
        v,
        wsync_tensor_t {
            struct_size,
            dtype,
            name,
            data,
            nbytes,
            ndim,
            device_type,
            device_index,
            reserved0,
            shape,
            flags,
            reserved1,
            full_shape,
            box_offset
        }
    );
    layout!(
        v,
        wsync_group_config_t {
            struct_size,
            num_receivers,
            group_name,
            store_addr,
            transport,
            adapter,
            options,
            num_options,
            timeout_ms
        }
    );
    layout!(
        v,
        wsync_group_stats_t {
            struct_size,
            num_receivers,
            committed_version,
            updates,
            batches,
            buckets,
            tensors,
            bytes,
            staging_bytes,
            send_seconds,
            device_staging_bytes,
            plans_computed,
            members,
            members_left
        }
    );
    layout!(
        v,
        wsync_receiver_config_t {
            struct_size,
            rank,
            store_addr,
            group_name,
            transport,
            options,
            num_options,
            timeout_ms
        }
    );
    layout!(
        v,
        wsync_receiver_event_t {
            struct_size,
            kind,
            version,
            bucket_index,
            num_tensors,
            tensors,
            placed,
            bytes
        }
    );
    layout!(
        v,
        wsync_member_event_t {
            struct_size,
            kind,
            rank,
            status,
            update,
            reason
        }
    );
    layout!(
        v,
        wsync_receiver_state_t {
            struct_size,
            receive_mode,
            committed_version,
            pending_version,
            buffers,
            late_writes,
            num_touched,
            staged_bytes,
            num_senders,
            planned,
            rank,
            rank_assigned
        }
    );
    layout!(
        v,
        wsync_plugin_info_t {
            struct_size,
            kind,
            name,
            path,
            version,
            detail,
            error,
            caps,
            abi_major,
            abi_minor,
            status,
            shadowed
        }
    );
    v
}

/// Every constant of the header, by its C name, with our value.
fn rust_constants() -> Vec<(&'static str, i64)> {
    macro_rules! c {
        ($($name:ident),* $(,)?) => { vec![$((stringify!($name), $name as i64)),*] };
    }
    c![
        WSYNC_ABI_VERSION_MAJOR,
        WSYNC_ABI_VERSION_MINOR,
        WSYNC_ABI_VERSION,
        WSYNC_TIMEOUT_DEFAULT,
        WSYNC_TIMEOUT_NO_WAIT,
        WSYNC_OK,
        WSYNC_ERR_INVALID_ARGUMENT,
        WSYNC_ERR_NOT_FOUND,
        WSYNC_ERR_VERSION_MISMATCH,
        WSYNC_ERR_UNSUPPORTED,
        WSYNC_ERR_TIMEOUT,
        WSYNC_ERR_ABORTED,
        WSYNC_ERR_PROTOCOL,
        WSYNC_ERR_IO,
        WSYNC_ERR_PEER_FAILED,
        WSYNC_ERR_OUT_OF_MEMORY,
        WSYNC_ERR_INVALID_STATE,
        WSYNC_ERR_ENGINE,
        WSYNC_ERR_INTERNAL,
        WSYNC_ERR_NO_DEVICE,
        WSYNC_ERR_REJECTED,
        WSYNC_STATUS_COUNT,
        WSYNC_LOG_ERROR,
        WSYNC_LOG_WARN,
        WSYNC_LOG_INFO,
        WSYNC_LOG_DEBUG,
        WSYNC_LOG_TRACE,
        WSYNC_DTYPE_INVALID,
        WSYNC_DTYPE_BOOL,
        WSYNC_DTYPE_INT8,
        WSYNC_DTYPE_INT16,
        WSYNC_DTYPE_INT32,
        WSYNC_DTYPE_INT64,
        WSYNC_DTYPE_UINT8,
        WSYNC_DTYPE_FLOAT16,
        WSYNC_DTYPE_BFLOAT16,
        WSYNC_DTYPE_FLOAT32,
        WSYNC_DTYPE_FLOAT64,
        WSYNC_DTYPE_FLOAT8_E4M3,
        WSYNC_DTYPE_FLOAT8_E5M2,
        WSYNC_DTYPE_COUNT,
        WSYNC_DEVICE_CPU,
        WSYNC_DEVICE_CUDA,
        WSYNC_MAX_NDIM,
        WSYNC_EVENT_NONE,
        WSYNC_EVENT_BUCKET,
        WSYNC_EVENT_COMMIT,
        WSYNC_EVENT_CLOSED,
        WSYNC_EVENT_ABORTED,
        WSYNC_PLACED_VIEW,
        WSYNC_PLACED_IN_PLACE,
        WSYNC_PLACED_STAGED,
        WSYNC_RECEIVE_IN_PLACE,
        WSYNC_RECEIVE_STAGED,
        WSYNC_BUFFERS_CLEAN,
        WSYNC_BUFFERS_MIXED,
        WSYNC_PLUGIN_KIND_TRANSPORT,
        WSYNC_PLUGIN_KIND_ADAPTER,
        WSYNC_OPTION_STRUCT_SIZE,
        WSYNC_TENSOR_STRUCT_SIZE,
        WSYNC_TENSOR_SLICE,
        WSYNC_TENSOR_REPLICA,
        WSYNC_GROUP_CONFIG_STRUCT_SIZE,
        WSYNC_GROUP_STATS_STRUCT_SIZE,
        WSYNC_RECEIVER_CONFIG_STRUCT_SIZE,
        WSYNC_RECEIVER_EVENT_STRUCT_SIZE,
        WSYNC_RECEIVER_STATE_STRUCT_SIZE,
        WSYNC_MEMBER_JOINED,
        WSYNC_MEMBER_LEFT,
        WSYNC_MEMBER_EVENT_STRUCT_SIZE,
        WSYNC_PLUGIN_INFO_STRUCT_SIZE,
    ]
}

fn include_dir() -> PathBuf {
    if let Some(d) = env::var_os("WSYNC_INCLUDE_DIR") {
        return PathBuf::from(d);
    }
    if let Ok(o) = Command::new("pkg-config").args(["--cflags-only-I", "wsync"]).output() {
        let flags = String::from_utf8_lossy(&o.stdout).into_owned();
        if let Some(dir) = flags.split_whitespace().find_map(|f| f.strip_prefix("-I")) {
            if Path::new(dir).join("wsync.h").exists() {
                return PathBuf::from(dir);
            }
        }
    }
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../include")
}

/// The C program: one line per fact, "layout STRUCT FIELD N" / "const NAME N".
fn c_source(layout: &Layout, constants: &[(&str, i64)]) -> String {
    let mut s =
        String::from("#include <stdio.h>\n#include <stddef.h>\n#include \"wsync.h\"\nint main(void) {\n");
    for (ty, field, _) in layout {
        if field.is_empty() {
            s += &format!("  printf(\"layout {ty}  %zu\\n\", sizeof({ty}));\n");
        } else if let Some(f) = field.strip_suffix(".size") {
            s += &format!("  printf(\"layout {ty} {field} %zu\\n\", sizeof((({ty}*)0)->{f}));\n");
        } else {
            s += &format!("  printf(\"layout {ty} {field} %zu\\n\", offsetof({ty}, {field}));\n");
        }
    }
    for (name, _) in constants {
        s += &format!("  printf(\"const {name} %lld\\n\", (long long)({name}));\n");
    }
    s + "  return 0;\n}\n"
}

fn run_c(source: &str) -> String {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let (src, exe) = (dir.join("wsync_layout.c"), dir.join("wsync_layout"));
    fs::write(&src, source).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let inc = include_dir();
    let out = Command::new(&cc).arg("-std=c99").arg("-I").arg(&inc).arg(&src).arg("-o").arg(&exe).output();
    let out = out.unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "compiling against {}/wsync.h failed:\n{}",
        inc.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Command::new(&exe).output().unwrap();
    assert!(run.status.success());
    String::from_utf8(run.stdout).unwrap()
}

#[test]
fn structs_and_constants_match_the_header() {
    let layout = rust_layout();
    let constants = rust_constants();
    let c = run_c(&c_source(&layout, &constants));
    let c_facts: BTreeMap<String, i64> = c
        .lines()
        .map(|l| {
            let (k, v) = l.rsplit_once(' ').unwrap();
            (k.to_string(), v.parse().unwrap())
        })
        .collect();
    let mut bad = Vec::new();
    for (ty, field, at) in &layout {
        let key = format!("layout {ty} {field}");
        let what = match field.strip_suffix(".size") {
            _ if field.is_empty() => "size".to_string(),
            Some(f) => format!("size of {f}"),
            None => format!("offset of {field}"),
        };
        if c_facts[&key] != *at as i64 {
            bad.push(format!("{ty}: {what} is {} in C, {at} in Rust", c_facts[&key]));
        }
    }
    for (name, value) in &constants {
        if c_facts[&format!("const {name}")] != *value {
            bad.push(format!("{name} is {} in C, {value} in Rust", c_facts[&format!("const {name}")]));
        }
    }
    assert!(bad.is_empty(), "wsync-sys differs from wsync.h:\n  {}", bad.join("\n  "));
    // Every STRUCT_SIZE is the full struct (no padding after the last field at ABI 1.4).
    for (ty, field, size) in &layout {
        if field.is_empty() {
            let name = format!("{}_STRUCT_SIZE", ty.trim_end_matches("_t").to_uppercase());
            let (_, v) = constants.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("no {name}"));
            assert_eq!(*v as usize, *size, "{ty}'s STRUCT_SIZE");
        }
    }
}

/// The header's WSYNC_API functions and the ones declared in src/lib.rs are the same set.
#[test]
fn every_function_of_the_header_is_declared() {
    let header = fs::read_to_string(include_dir().join("wsync.h")).unwrap();
    let ours = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let names = |text: &str, marker: &str| -> Vec<String> {
        let mut v: Vec<String> = text
            .split(marker)
            .skip(1)
            .filter_map(|rest| {
                let head = &rest[..rest.find('(')?];
                let name = head.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next()?;
                name.starts_with("wsync_").then(|| name.to_string())
            })
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let c = names(&header, "WSYNC_API ");
    let rust = names(&ours, "pub fn ");
    assert!(c.len() >= 25, "found only {} functions in wsync.h: {:?}", c.len(), c);
    assert_eq!(c, rust, "functions of wsync.h (left) and wsync-sys (right) differ");
}

/// A Rust FFI type as C ("*const c_char" -> "char const*").
fn c_type(rust: &str) -> String {
    let t = rust.trim();
    if let Some(rest) = t.strip_prefix("*const ") {
        return format!("{} const*", c_type(rest));
    }
    if let Some(rest) = t.strip_prefix("*mut ") {
        return format!("{}*", c_type(rest));
    }
    match t {
        "c_void" => "void",
        "c_char" => "char",
        "u8" => "uint8_t",
        "u32" => "uint32_t",
        "i32" => "int32_t",
        "u64" => "uint64_t",
        "i64" => "int64_t",
        other => other, // wsync_status_t, wsync_log_fn, the structs
    }
    .to_string()
}

/// Every declaration of src/lib.rs's extern block, as a C function pointer initialised with the
/// header's function: the C compiler refuses any parameter or return type that differs.
#[test]
fn every_function_signature_matches_the_header() {
    let ours = fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs")).unwrap();
    let block = &ours[ours.find("extern \"C\" {").expect("the extern block")..];
    let block = &block[..block.find("\n}").unwrap()];
    let flat: String = block.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut c = String::from("#include <stdint.h>\n#include \"wsync.h\"\n");
    let mut n = 0;
    for decl in flat.split(';').filter(|d| d.contains("pub fn ")) {
        let decl = &decl[decl.find("pub fn ").unwrap() + 7..];
        let (name, rest) = decl.split_at(decl.find('(').unwrap());
        let close = rest.rfind(')').unwrap();
        let args: Vec<String> = rest[1..close]
            .split(',')
            .filter(|a| !a.trim().is_empty())
            .map(|a| c_type(a.split_once(':').expect("name: type").1))
            .collect();
        let ret = rest[close + 1..].trim().strip_prefix("->").map_or("void".to_string(), c_type);
        let args = if args.is_empty() { "void".to_string() } else { args.join(", ") };
        c += &format!("{ret} (*check_{name})({args}) = {name};\n", name = name.trim());
        n += 1;
    }
    assert!(n >= 25, "found only {n} declarations");
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    let src = dir.join("wsync_signatures.c");
    fs::write(&src, &c).unwrap();
    let cc = env::var("CC").unwrap_or_else(|_| "cc".to_string());
    let out = Command::new(&cc)
        .args(["-std=c99", "-c", "-Werror=incompatible-pointer-types", "-Werror=discarded-qualifiers", "-I"])
        .arg(include_dir())
        .arg(&src)
        .arg("-o")
        .arg(dir.join("wsync_signatures.o"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
    assert!(
        out.status.success(),
        "a declaration of wsync-sys differs from wsync.h:\n{}\n{c}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The library we link answers with the ABI major we were written for.
#[test]
fn the_linked_library_speaks_this_abi() {
    let v = unsafe { wsync_abi_version() };
    assert_eq!(v >> 16, WSYNC_ABI_VERSION_MAJOR, "libwsync's ABI is {}.{}", v >> 16, v & 0xffff);
    assert!(v & 0xffff >= WSYNC_ABI_VERSION_MINOR);
}
