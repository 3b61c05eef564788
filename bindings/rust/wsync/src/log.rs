//! Routing the library's log lines to a Rust closure.
use std::ffi::CStr;
use std::os::raw::{c_char, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex, RwLock};

use wsync_sys as sys;

/// Log levels, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// A failure.
    Error = 1,
    /// Something the user should know (the default sink's level).
    Warn = 2,
    /// Progress.
    Info = 3,
    /// Detail for debugging.
    Debug = 4,
    /// Every step.
    Trace = 5,
}

impl Level {
    fn from_code(code: i32) -> Level {
        match code {
            i32::MIN..=1 => Level::Error,
            2 => Level::Warn,
            3 => Level::Info,
            4 => Level::Debug,
            _ => Level::Trace,
        }
    }
}

type Callback = Arc<dyn Fn(Level, &str) + Send + Sync>;

/// The closure in use. The trampoline takes its own reference under the read lock, so replacing
/// it never frees a closure that is running.
static CALLBACK: RwLock<Option<Callback>> = RwLock::new(None);

unsafe extern "C" fn trampoline(_user_data: *mut c_void, level: i32, message: *const c_char) {
    // Nothing may unwind into C: the whole body (the closure, and dropping the last reference to a
    // replaced one) runs under catch_unwind; a panic loses the line.
    let _ = catch_unwind(AssertUnwindSafe(|| {
        let cb = match CALLBACK.read() {
            Ok(g) => g.clone(),
            Err(p) => p.into_inner().clone(),
        };
        if let (Some(cb), false) = (cb, message.is_null()) {
            // SAFETY: a NUL-terminated message valid during this call.
            let text = CStr::from_ptr(message).to_string_lossy();
            cb(Level::from_code(level), &text);
        }
    }));
}

/// Serialises the setters, so the closure stored and the sink installed in the library agree.
/// (Not the RwLock: the library's wait for running callbacks would then deadlock with them.)
static SETTER: Mutex<()> = Mutex::new(());

/// Route every library and plugin log line up to `max_level` to `callback`, from any wsync
/// thread, possibly concurrently. A panic in the callback is caught (the line is dropped).
pub fn set_log_callback<F>(callback: F, max_level: Level)
where
    F: Fn(Level, &str) + Send + Sync + 'static,
{
    let _setter = SETTER.lock().unwrap_or_else(|p| p.into_inner());
    *CALLBACK.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(callback));
    // SAFETY: the trampoline is a valid function for the whole program; user_data is unused.
    unsafe { sys::wsync_set_log_callback(Some(trampoline), std::ptr::null_mut(), max_level as i32) };
}

/// Restore the default sink: stderr, filtered by the environment variable WSYNC_LOG_LEVEL.
pub fn reset_log_callback() {
    let _setter = SETTER.lock().unwrap_or_else(|p| p.into_inner());
    // SAFETY: NULL restores the default.
    unsafe { sys::wsync_set_log_callback(None, std::ptr::null_mut(), 0) };
    *CALLBACK.write().unwrap_or_else(|p| p.into_inner()) = None;
}
