//! Small conversions shared by the builders: strings to C, timeouts to milliseconds.
use std::ffi::CString;
use std::time::Duration;

use crate::error::{Error, Result};
use wsync_sys as sys;

/// A Rust string as a C string; a NUL inside is refused, naming `what`.
pub(crate) fn c_string(what: &str, s: &str) -> Result<CString> {
    CString::new(s)
        .map_err(|_| Error::InvalidArgument(format!("{what} '{}' contains a NUL byte", s.escape_debug())))
}

/// A timeout as wsync's milliseconds: None = the default (-1); a duration rounds up to whole
/// milliseconds, so a non-zero wait never becomes "do not block".
pub(crate) fn timeout_ms(t: Option<Duration>) -> i64 {
    match t {
        None => i64::from(sys::WSYNC_TIMEOUT_DEFAULT),
        Some(d) => {
            let ms = d.as_millis() + u128::from(d.subsec_nanos() % 1_000_000 != 0);
            i64::try_from(ms).unwrap_or(i64::MAX)
        }
    }
}

/// An optional string as an optional C string (None: the library's default).
pub(crate) fn c_string_opt(what: &str, s: &Option<String>) -> Result<Option<CString>> {
    s.as_deref().map(|s| c_string(what, s)).transpose()
}

/// The pointer of an optional C string, NULL for None.
pub(crate) fn ptr_or_null(s: &Option<CString>) -> *const std::os::raw::c_char {
    s.as_ref().map_or(std::ptr::null(), |c| c.as_ptr())
}

/// An init timeout: None = the option timeout_ms (-1); a duration at least 1 ms (0 would also
/// mean the default there).
pub(crate) fn init_timeout_ms(t: Option<Duration>) -> i64 {
    t.map_or(-1, |t| timeout_ms(Some(t)).max(1))
}

/// Options as C strings, kept alive with the array of wsync_option_t that points into them.
#[derive(Default)]
pub(crate) struct COptions {
    strings: Vec<(CString, CString)>,
    raw: Vec<sys::wsync_option_t>,
}

impl COptions {
    pub(crate) fn new(options: &[(String, String)]) -> Result<COptions> {
        let mut o = COptions::default();
        for (k, v) in options {
            o.strings.push((c_string("option key", k)?, c_string(&format!("value of option '{k}'"), v)?));
        }
        o.raw = o
            .strings
            .iter()
            .map(|(k, v)| sys::wsync_option_t { key: k.as_ptr(), value: v.as_ptr(), ..Default::default() })
            .collect();
        Ok(o)
    }

    pub(crate) fn ptr(&self) -> *const sys::wsync_option_t {
        if self.raw.is_empty() {
            std::ptr::null()
        } else {
            self.raw.as_ptr()
        }
    }

    pub(crate) fn len(&self) -> u64 {
        self.raw.len() as u64
    }
}

/// The newest ABI minor whose functions this crate links: 1.4's `wsync_receiver_get_state`
/// (`Receiver::state`). Against an older library the dynamic loader already refuses the program,
/// naming the missing version node `WSYNC_1.4` (docs/ABI.md, "Symbol versions").
pub(crate) const MIN_ABI_MINOR: u32 = 4;

/// The loaded library's ABI major must be the one this crate was written for, and its minor at
/// least `MIN_ABI_MINOR`.
pub(crate) fn check_abi() -> Result<()> {
    // SAFETY: no arguments, thread-safe.
    let v = unsafe { sys::wsync_abi_version() };
    if v >> 16 != sys::WSYNC_ABI_VERSION_MAJOR || (v & 0xffff) < MIN_ABI_MINOR {
        return Err(Error::VersionMismatch(format!(
            "the loaded libwsync speaks ABI {}.{}; this crate needs {}.{} or newer within major {}",
            v >> 16,
            v & 0xffff,
            sys::WSYNC_ABI_VERSION_MAJOR,
            MIN_ABI_MINOR,
            sys::WSYNC_ABI_VERSION_MAJOR
        )));
    }
    Ok(())
}
