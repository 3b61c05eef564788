//! # wsync
//!
//! Publish freshly trained weights from a trainer into running inference engines, through
//! libwsync's stable C ABI. A [`Group`] is the trainer's side (rank 0); each engine worker holds a
//! [`Receiver`] (ranks 1..N). Every failure is an [`Error`] carrying the status and the message
//! wsync gave for it.
//!
//! ```no_run
//! use wsync::{Group, Tensor};
//! # fn main() -> wsync::Result<()> {
//! let weights = vec![0.5f32; 1024];
//! let mut group = Group::builder(2).group_name("demo").store_addr("0.0.0.0:29600").init()?;
//! group.send(&[Tensor::new("w", &[32, 32], &weights)?], None)?;
//! group.finalize(1, None)?;
//! # Ok(()) }
//! ```
//!
//! Ownership: a [`Tensor`] borrows its memory; [`Group::send`] reads it during the call, and the
//! asynchronous send reads it until the [`Group::pipeline`] call that started it returns, which
//! the borrow checker enforces. Threading: a `Group` or `Receiver` moves between threads but is
//! used from one at a time; [`AbortHandle`] aborts a group from any thread.
//!
//! The raw declarations are re-exported as [`sys`].
#![warn(missing_docs)]

mod error;
mod group;
mod log;
mod receiver;
mod tensor;
mod util;

pub use error::{Error, Result};
pub use group::{AbortHandle, Group, GroupBuilder, GroupStats, MemberEvent, Pipeline, SendHandle};
pub use log::{reset_log_callback, set_log_callback, Level};
pub use receiver::{Buffers, Event, ReceiveMode, Receiver, ReceiverBuilder, ReceiverState};
pub use tensor::{as_bytes, as_bytes_mut, Device, Dtype, Element, Pod, ReceivedTensor, Tensor};
pub use wsync_sys as sys;

/// The timeout rule of wsync.h, the same in every binding: the group's or receiver's `timeout_ms`
/// option (60 s unless set).
pub const DEFAULT_TIMEOUT: Option<std::time::Duration> = None;
/// Do not block: `Receiver::next` and `SendHandle::wait` answer "not yet" at once,
/// `Pipeline::start` does not wait for room; a wait for a receiver's answer cannot be skipped, so
/// `send` and `finalize` take the default.
pub const NO_WAIT: Option<std::time::Duration> = Some(std::time::Duration::ZERO);

/// The loaded library's ABI, (major, minor).
pub fn abi_version() -> (u32, u32) {
    // SAFETY: thread-safe, never fails.
    let v = unsafe { sys::wsync_abi_version() };
    (v >> 16, v & 0xffff)
}

/// The loaded library's release, e.g. "0.7.0".
pub fn version() -> &'static str {
    // SAFETY: static storage.
    unsafe { error::static_str(sys::wsync_version_string()) }
}
