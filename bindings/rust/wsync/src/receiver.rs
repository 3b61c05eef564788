//! The receiver half: one engine worker.
use std::any::TypeId;
use std::collections::HashMap;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::tensor::{Element, ReceivedTensor, Tensor};
use crate::util::{c_string, c_string_opt, check_abi, init_timeout_ms, ptr_or_null, timeout_ms, COptions};
use std::ffi::CStr;
use wsync_sys as sys;

/// How a receiver is made: [`Receiver::builder`], then [`ReceiverBuilder::init`].
#[derive(Debug, Clone)]
pub struct ReceiverBuilder {
    rank: u32,
    store_addr: String,
    group_name: Option<String>,
    transport: Option<String>,
    options: Vec<(String, String)>,
    timeout: Option<Duration>,
}

impl ReceiverBuilder {
    /// The group's name (default "wsync"); must equal the sender's.
    pub fn group_name(mut self, name: &str) -> Self {
        self.group_name = Some(name.to_string());
        self
    }

    /// The transport's name or path (default: the one the sender announces).
    pub fn transport(mut self, transport: &str) -> Self {
        self.transport = Some(transport.to_string());
        self
    }

    /// One receiver option (`timeout_ms`, `device`, `receive_mode`, `transport.*`; docs/ABI.md).
    pub fn option(mut self, key: &str, value: &str) -> Self {
        self.options.push((key.to_string(), value.to_string()));
        self
    }

    /// How registered buffers get their bytes (the option `receive_mode`; ABI 1.4): in place as
    /// they arrive (the default), or staged and copied in at [`Receiver::commit`], so that a
    /// failed update leaves them untouched.
    pub fn receive_mode(self, mode: ReceiveMode) -> Self {
        let value = match mode {
            ReceiveMode::InPlace => "in_place",
            ReceiveMode::Staged => "staged",
        };
        self.option("receive_mode", value)
    }

    /// How long init waits for the store and the sender (default 60 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Join the group: [`Error::Rejected`] names why the sender refused (group name, rank).
    pub fn init(self) -> Result<Receiver> {
        check_abi()?;
        let store = c_string("store address", &self.store_addr)?;
        let name = c_string_opt("group name", &self.group_name)?;
        let transport = c_string_opt("transport", &self.transport)?;
        let options = COptions::new(&self.options)?;
        let cfg = sys::wsync_receiver_config_t {
            rank: self.rank,
            store_addr: store.as_ptr(),
            group_name: ptr_or_null(&name),
            transport: ptr_or_null(&transport),
            options: options.ptr(),
            num_options: options.len(),
            timeout_ms: init_timeout_ms(self.timeout),
            ..Default::default()
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: cfg and its strings live through the call, which copies them.
        check(unsafe { sys::wsync_receiver_init(&cfg, &mut raw) })?;
        Ok(Receiver { raw, registered: HashMap::new(), unsettled: false })
    }
}

/// A parameter buffer the receiver owns and wsync writes into: a `Box<[T]>` turned into a raw
/// pointer, so that no Rust reference claims it while wsync holds its address.
struct Owned {
    ptr: *mut u8,
    len: usize,
    bytes: usize,
    elem: TypeId,
    free: unsafe fn(*mut u8, usize),
}

// SAFETY: plain numbers owned by the receiver; freed once, in Drop.
unsafe impl Send for Owned {}

impl Owned {
    fn new<T: Element>(data: Vec<T>) -> Owned {
        unsafe fn free<T>(p: *mut u8, len: usize) {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(p as *mut T, len)));
        }
        let len = data.len();
        let bytes = std::mem::size_of_val(&data[..]);
        let ptr = Box::into_raw(data.into_boxed_slice()) as *mut T as *mut u8;
        Owned { ptr, len, bytes, elem: TypeId::of::<T>(), free: free::<T> }
    }

    fn bytes(&self) -> &[u8] {
        // SAFETY: `bytes` initialised bytes at ptr, alive until Drop.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }

    fn typed<T: Element>(&self) -> Option<&[T]> {
        // SAFETY: the type is the one the box was made of.
        (self.elem == TypeId::of::<T>())
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr as *const T, self.len) })
    }
}

impl Drop for Owned {
    fn drop(&mut self) {
        // SAFETY: ptr and len came from Box::into_raw of a Box<[T]> with this free::<T>.
        unsafe { (self.free)(self.ptr, self.len) }
    }
}

/// One engine worker's end of a group (ranks 1..N). Destroyed on drop (leaves the group).
///
/// Threading: `Send`, not `Sync`; every call that talks to the group takes `&mut self`.
pub struct Receiver {
    raw: *mut sys::wsync_receiver_t,
    /// Registered parameter buffers, owned here so that they outlive every write into them
    /// (a leaked Receiver leaks them too, rather than letting wsync write into freed memory).
    registered: HashMap<String, Owned>,
    /// The transport gave up on a receive into the registered buffers and may still write into
    /// them (the state's `late_writes`, in place only): they are not handed out until drop.
    unsettled: bool,
}

/// How registered buffers get their bytes ([`ReceiverBuilder::receive_mode`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReceiveMode {
    /// Written as the buckets arrive (the default): a failed update can leave a mix.
    InPlace,
    /// Staged in wsync's memory and copied in by [`Receiver::commit`] only.
    Staged,
}

/// What the registered buffers hold ([`ReceiverState::buffers`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Buffers {
    /// No update wrote into them since the last commit: they hold what they held then.
    Clean,
    /// Since the last commit an update wrote into the [`ReceiverState::touched`] ones (in place:
    /// arriving, waiting for its commit, or failed): refuse to serve them until the next commit.
    Mixed,
}

/// What the updates did to the registered buffers ([`Receiver::state`]; ABI 1.4).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceiverState {
    /// The receiver's `receive_mode`.
    pub receive_mode: ReceiveMode,
    /// The last version committed, 0 before any.
    pub committed_version: u64,
    /// The version of a Commit event not yet confirmed with [`Receiver::commit`], else 0.
    pub pending_version: u64,
    /// Clean or mixed.
    pub buffers: Buffers,
    /// The transport gave up on a receive into registered buffers and may still write into them
    /// until the receiver is dropped (in place only).
    pub late_writes: bool,
    /// In place: the registered tensors written since the last commit; staged: those staged for
    /// the update in progress. In the order their first bytes were posted.
    pub touched: Vec<String>,
    /// Staging memory held for registered tensors (staged mode; kept for later updates).
    pub staged_bytes: u64,
    /// The senders this receiver joined (many senders, ABI 1.5; 1 otherwise or with an older library).
    pub num_senders: u32,
    /// The senders plan (ABI 1.5): they wait for this receiver's needs, which `register` says
    /// (also with no buffers) or the first `next`.
    pub planned: bool,
    /// This receiver's rank: the one it asked for, or the one an elastic group's sender assigned
    /// when it asked for rank 0 (ABI 1.5; 0 with an older library).
    pub rank: u32,
    /// The sender assigned `rank` (ABI 1.5).
    pub rank_assigned: bool,
}

// SAFETY: wsync allows a receiver to be used from any thread, one at a time.
unsafe impl Send for Receiver {}

/// What [`Receiver::next`] returned.
#[derive(Debug)]
pub enum Event<'r> {
    /// Tensors arrived (views valid until the next call to `next`).
    Bucket {
        /// The bucket's index within the update, from 0.
        index: u64,
        /// Payload bytes of the bucket.
        bytes: u64,
        /// The tensors completed by this bucket (a split tensor is reported once, at its end).
        tensors: Vec<ReceivedTensor<'r>>,
    },
    /// The sender finalized `version`: apply it, then [`Receiver::commit`].
    Commit {
        /// The version to commit.
        version: u64,
    },
    /// The sender destroyed the group: drop the receiver.
    Closed,
    /// The sender aborted the current update: it never commits (staged, the previous weights
    /// stand; in place, see [`Receiver::state`]).
    Aborted,
}

impl Receiver {
    /// A builder for rank `rank` of the group whose store is at `store_addr` ("host:port").
    pub fn builder(rank: u32, store_addr: &str) -> ReceiverBuilder {
        ReceiverBuilder {
            rank,
            store_addr: store_addr.to_string(),
            group_name: None,
            transport: None,
            options: Vec::new(),
            timeout: None,
        }
    }

    /// Register a parameter: later buckets write a tensor of this name straight into `data`
    /// (reported as placed). The receiver takes the buffer (read it with [`Self::registered`]);
    /// registering a name again replaces it. dtype and shape of what arrives must match.
    pub fn register<T: Element>(&mut self, name: &str, shape: &[i64], data: Vec<T>) -> Result<()> {
        let owned = Owned::new(data);
        // SAFETY: the descriptor describes the buffer exactly; it lives until the receiver is
        // destroyed (Drop, before the buffers drop) or the name is registered again (the old
        // buffer is dropped after that call returned).
        let t = unsafe {
            Tensor::from_raw(
                name,
                T::DTYPE,
                shape,
                owned.ptr as *const _,
                owned.bytes as u64,
                crate::Device::Cpu,
            )?
        };
        let raw = t.raw();
        // SAFETY: a live receiver; one descriptor.
        check(unsafe { sys::wsync_receiver_register(self.raw, &raw, 1) })?;
        self.registered.insert(name.to_string(), owned);
        Ok(())
    }

    /// The bytes of a registered buffer: what the updates wrote into it. None for a name never
    /// registered, and once a failed update left a receive the transport gave up on that may still
    /// land in the buffers (the state's `late_writes`, in place only; dropping the receiver ends
    /// it). After any other failure they are readable: see [`Self::state`] for whether they hold a
    /// mix (in place) or the previous version (staged).
    pub fn registered(&self, name: &str) -> Option<&[u8]> {
        if self.unsettled {
            return None;
        }
        self.registered.get(name).map(Owned::bytes)
    }

    /// A registered buffer as the type it was registered with (None for another type, and as
    /// [`Self::registered`]).
    pub fn registered_as<T: Element>(&self, name: &str) -> Option<&[T]> {
        if self.unsettled {
            return None;
        }
        self.registered.get(name)?.typed::<T>()
    }

    /// Wait up to `timeout` (None: the receiver's timeout_ms option, 60 s unless set) for the next
    /// event. The event borrows the receiver: its tensor views end before the next call.
    /// [`Error::Timeout`] when nothing arrived (the receiver stays usable); [`Error::PeerFailed`]
    /// when the sender vanished.
    pub fn next(&mut self, timeout: Option<Duration>) -> Result<Event<'_>> {
        let mut ev = sys::wsync_receiver_event_t::default();
        // SAFETY: a live receiver and an event struct of the declared size.
        let st = unsafe { sys::wsync_receiver_next(self.raw, &mut ev, timeout_ms(timeout)) };
        // The error is read (by check) before the state query, which would replace it.
        let checked = check(st);
        if checked.is_err() {
            self.unsettled = self.late_writes().unwrap_or(true);
        }
        checked?;
        Ok(match ev.kind {
            sys::WSYNC_EVENT_BUCKET => {
                Event::Bucket { index: ev.bucket_index, bytes: ev.bytes, tensors: tensors(&ev)? }
            }
            sys::WSYNC_EVENT_COMMIT => Event::Commit { version: ev.version },
            sys::WSYNC_EVENT_CLOSED => Event::Closed,
            sys::WSYNC_EVENT_ABORTED => Event::Aborted,
            k => {
                return Err(Error::Internal(format!(
                    "wsync_receiver_next returned an unknown event kind {k}"
                )))
            }
        })
    }

    /// Confirm that `version` (from the last Commit event) is applied. In staged mode this is
    /// where the registered buffers get the version: the sender is told, then the staged bytes are
    /// copied in (if the sender cannot be told, nothing is copied and this fails).
    pub fn commit(&mut self, version: u64) -> Result<()> {
        // SAFETY: a live receiver.
        check(unsafe { sys::wsync_receiver_commit(self.raw, version) })
    }

    /// What the updates did to the registered buffers: whether they hold a mix (refuse to serve
    /// until the next commit), which tensors were touched, and the staging memory (ABI 1.4).
    pub fn state(&self) -> Result<ReceiverState> {
        let s = self.raw_state()?;
        let receive_mode = match s.receive_mode {
            sys::WSYNC_RECEIVE_IN_PLACE => ReceiveMode::InPlace,
            sys::WSYNC_RECEIVE_STAGED => ReceiveMode::Staged,
            m => return Err(Error::Internal(format!("wsync_receiver_get_state gave receive_mode {m}"))),
        };
        let buffers = match s.buffers {
            sys::WSYNC_BUFFERS_CLEAN => Buffers::Clean,
            sys::WSYNC_BUFFERS_MIXED => Buffers::Mixed,
            b => return Err(Error::Internal(format!("wsync_receiver_get_state gave buffers {b}"))),
        };
        let mut touched = Vec::with_capacity(s.num_touched.min(1 << 20) as usize);
        for i in 0..s.num_touched {
            // SAFETY: a live receiver; the name is copied before any other call on it.
            let p = unsafe { sys::wsync_receiver_touched_name(self.raw, i) };
            if p.is_null() {
                return Err(Error::Internal(format!("touched name {i} of {} is missing", s.num_touched)));
            }
            // SAFETY: a NUL-terminated name owned by the receiver, valid until its next call.
            touched.push(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned());
        }
        Ok(ReceiverState {
            receive_mode,
            committed_version: s.committed_version,
            pending_version: s.pending_version,
            buffers,
            late_writes: s.late_writes != 0,
            touched,
            staged_bytes: s.staged_bytes,
            num_senders: s.num_senders.max(1),
            planned: s.planned != 0,
            rank: s.rank,
            rank_assigned: s.rank_assigned != 0,
        })
    }

    fn raw_state(&self) -> Result<sys::wsync_receiver_state_t> {
        let mut s = sys::wsync_receiver_state_t::default();
        // SAFETY: a live receiver, a struct of the size we declare.
        check(unsafe { sys::wsync_receiver_get_state(self.raw, &mut s) })?;
        Ok(s)
    }

    fn late_writes(&self) -> Result<bool> {
        Ok(self.raw_state()?.late_writes != 0)
    }

    /// The last version this receiver committed, 0 before any.
    pub fn committed_version(&self) -> u64 {
        // SAFETY: a live receiver.
        unsafe { sys::wsync_receiver_committed_version(self.raw) }
    }
}

/// The event's tensors, as views that live as long as the borrow of the receiver.
fn tensors<'r>(ev: &sys::wsync_receiver_event_t) -> Result<Vec<ReceivedTensor<'r>>> {
    let n = usize::try_from(ev.num_tensors)
        .map_err(|_| Error::Internal("too many tensors in an event".into()))?;
    if n == 0 {
        return Ok(Vec::new());
    }
    if ev.tensors.is_null() || ev.placed.is_null() {
        return Err(Error::Internal(format!("an event of {n} tensors without their descriptors")));
    }
    let step = ev_step(ev)?;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: the library hands out num_tensors descriptors `step` bytes apart and as many
        // placed flags, valid until the next wsync_receiver_next, which needs &mut Receiver.
        let (raw, placed) = unsafe {
            let t = &*((ev.tensors as *const u8).add(i * step) as *const sys::wsync_tensor_t);
            (t, *ev.placed.add(i))
        };
        out.push(ReceivedTensor::new(raw, placed));
    }
    Ok(out)
}

/// Descriptors in an array step by their first element's struct_size (wsync.h), exactly; it must
/// cover every field this crate reads and be a multiple of 8.
fn ev_step(ev: &sys::wsync_receiver_event_t) -> Result<usize> {
    // SAFETY: at least one descriptor (checked by the caller).
    array_step(unsafe { (*ev.tensors).struct_size } as usize)
}

fn array_step(size: usize) -> Result<usize> {
    // The fields this crate reads of a received descriptor end with `shape` (the 1.0 layout):
    // a 1.4 library's 112-byte descriptors and 1.5's 248-byte ones are both fine.
    // (offset of `shape`, 48, plus its 64 bytes; `offset_of!` is newer than this crate's MSRV)
    let reads = 48 + 8 * sys::WSYNC_MAX_NDIM;
    if size < reads || size % 8 != 0 {
        return Err(Error::VersionMismatch(format!(
            "tensor descriptors of {size} bytes; this crate reads {reads} and steps by a multiple of 8"
        )));
    }
    Ok(size)
}

#[cfg(test)]
mod stride_tests {
    #[test]
    fn arrays_step_by_the_struct_size_exactly() {
        assert_eq!(super::array_step(112).unwrap(), 112); // ABI 1.4's descriptor
        assert_eq!(super::array_step(120).unwrap(), 120);
        assert_eq!(super::array_step(248).unwrap(), 248); // ABI 1.5's
        assert!(super::array_step(104).is_err());
        assert!(super::array_step(116).is_err());
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // SAFETY: destroy accepts the pointer init returned, once, and never fails.
        unsafe { sys::wsync_receiver_destroy(self.raw) };
    }
}
