//! Errors: one enum, a variant per status code of wsync.h, each carrying the message that
//! explains this failure (wsync_last_error(), read in the same call, on the same thread).
use std::ffi::CStr;
use std::fmt;

use wsync_sys as sys;

/// Every failure of a wsync call. The variant is the status code; the text is what failed, naming
/// the option, tensor, rank, file or URL involved.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A bad argument or option value (`WSYNC_ERR_INVALID_ARGUMENT`).
    InvalidArgument(String),
    /// A plugin, symbol, key or tensor that does not exist (`WSYNC_ERR_NOT_FOUND`).
    NotFound(String),
    /// A plugin or peer speaking another ABI or protocol version (`WSYNC_ERR_VERSION_MISMATCH`).
    VersionMismatch(String),
    /// What the plugin or transport cannot do (`WSYNC_ERR_UNSUPPORTED`).
    Unsupported(String),
    /// A deadline passed (`WSYNC_ERR_TIMEOUT`).
    Timeout(String),
    /// The group was aborted, here or by the peer (`WSYNC_ERR_ABORTED`).
    Aborted(String),
    /// Malformed or corrupted data from the wire (`WSYNC_ERR_PROTOCOL`).
    Protocol(String),
    /// A socket, file or transport operation failed (`WSYNC_ERR_IO`).
    Io(String),
    /// A peer died, closed its connection or did not answer in time (`WSYNC_ERR_PEER_FAILED`).
    PeerFailed(String),
    /// An allocation failed (`WSYNC_ERR_OUT_OF_MEMORY`).
    OutOfMemory(String),
    /// The call is not allowed now (`WSYNC_ERR_INVALID_STATE`).
    InvalidState(String),
    /// The inference engine refused the request (`WSYNC_ERR_ENGINE`).
    Engine(String),
    /// A bug in wsync or a plugin (`WSYNC_ERR_INTERNAL`).
    Internal(String),
    /// No CUDA device where one is needed (`WSYNC_ERR_NO_DEVICE`).
    NoDevice(String),
    /// The group refused this receiver: wrong group name or rank (`WSYNC_ERR_REJECTED`).
    Rejected(String),
    /// A status this crate does not know (a newer library).
    Other {
        /// The status code.
        status: i32,
        /// What failed.
        message: String,
    },
}

/// `Result<T, wsync::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// The error for `status` with `message`; `status` must not be `WSYNC_OK`.
    pub fn new(status: i32, message: impl Into<String>) -> Error {
        let m = message.into();
        match status {
            sys::WSYNC_ERR_INVALID_ARGUMENT => Error::InvalidArgument(m),
            sys::WSYNC_ERR_NOT_FOUND => Error::NotFound(m),
            sys::WSYNC_ERR_VERSION_MISMATCH => Error::VersionMismatch(m),
            sys::WSYNC_ERR_UNSUPPORTED => Error::Unsupported(m),
            sys::WSYNC_ERR_TIMEOUT => Error::Timeout(m),
            sys::WSYNC_ERR_ABORTED => Error::Aborted(m),
            sys::WSYNC_ERR_PROTOCOL => Error::Protocol(m),
            sys::WSYNC_ERR_IO => Error::Io(m),
            sys::WSYNC_ERR_PEER_FAILED => Error::PeerFailed(m),
            sys::WSYNC_ERR_OUT_OF_MEMORY => Error::OutOfMemory(m),
            sys::WSYNC_ERR_INVALID_STATE => Error::InvalidState(m),
            sys::WSYNC_ERR_ENGINE => Error::Engine(m),
            sys::WSYNC_ERR_INTERNAL => Error::Internal(m),
            sys::WSYNC_ERR_NO_DEVICE => Error::NoDevice(m),
            sys::WSYNC_ERR_REJECTED => Error::Rejected(m),
            status => Error::Other { status, message: m },
        }
    }

    /// The status code, `WSYNC_ERR_*`.
    pub fn status(&self) -> i32 {
        match self {
            Error::InvalidArgument(_) => sys::WSYNC_ERR_INVALID_ARGUMENT,
            Error::NotFound(_) => sys::WSYNC_ERR_NOT_FOUND,
            Error::VersionMismatch(_) => sys::WSYNC_ERR_VERSION_MISMATCH,
            Error::Unsupported(_) => sys::WSYNC_ERR_UNSUPPORTED,
            Error::Timeout(_) => sys::WSYNC_ERR_TIMEOUT,
            Error::Aborted(_) => sys::WSYNC_ERR_ABORTED,
            Error::Protocol(_) => sys::WSYNC_ERR_PROTOCOL,
            Error::Io(_) => sys::WSYNC_ERR_IO,
            Error::PeerFailed(_) => sys::WSYNC_ERR_PEER_FAILED,
            Error::OutOfMemory(_) => sys::WSYNC_ERR_OUT_OF_MEMORY,
            Error::InvalidState(_) => sys::WSYNC_ERR_INVALID_STATE,
            Error::Engine(_) => sys::WSYNC_ERR_ENGINE,
            Error::Internal(_) => sys::WSYNC_ERR_INTERNAL,
            Error::NoDevice(_) => sys::WSYNC_ERR_NO_DEVICE,
            Error::Rejected(_) => sys::WSYNC_ERR_REJECTED,
            Error::Other { status, .. } => *status,
        }
    }

    /// "WSYNC_ERR_TIMEOUT", ... (wsync_status_name).
    pub fn status_name(&self) -> &'static str {
        // SAFETY: static storage, never NULL.
        unsafe { static_str(sys::wsync_status_name(self.status())) }
    }

    /// What failed.
    pub fn message(&self) -> &str {
        match self {
            Error::InvalidArgument(m)
            | Error::NotFound(m)
            | Error::VersionMismatch(m)
            | Error::Unsupported(m)
            | Error::Timeout(m)
            | Error::Aborted(m)
            | Error::Protocol(m)
            | Error::Io(m)
            | Error::PeerFailed(m)
            | Error::OutOfMemory(m)
            | Error::InvalidState(m)
            | Error::Engine(m)
            | Error::Internal(m)
            | Error::NoDevice(m)
            | Error::Rejected(m) => m,
            Error::Other { message, .. } => message,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message())
    }
}

impl std::error::Error for Error {}

/// `Ok(())` for WSYNC_OK, else the error with wsync_last_error(). Call it right after the wsync
/// call, on the same thread, before any other wsync call: the message is thread-local.
pub(crate) fn check(status: sys::wsync_status_t) -> Result<()> {
    if status == sys::WSYNC_OK {
        return Ok(());
    }
    // SAFETY: never NULL; valid until the next wsync call on this thread, and copied now.
    let message = unsafe { CStr::from_ptr(sys::wsync_last_error()) }.to_string_lossy().into_owned();
    Err(Error::new(status, message))
}

/// A `&'static str` from one of the library's static strings ("" if not UTF-8).
///
/// # Safety
/// `p` must point to a NUL-terminated string of static storage.
pub(crate) unsafe fn static_str(p: *const std::os::raw::c_char) -> &'static str {
    if p.is_null() {
        return "";
    }
    CStr::from_ptr(p).to_str().unwrap_or("")
}
