//! The receiver half: one engine worker.
use std::any::TypeId;
use std::collections::HashMap;
use std::time::Duration;

use crate::error::{check, Error, Result};
use crate::tensor::{Element, ReceivedTensor, Tensor};
use crate::util::{c_string, c_string_opt, check_abi, init_timeout_ms, ptr_or_null, timeout_ms, COptions};
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

    /// One "transport.*" option.
    pub fn option(mut self, key: &str, value: &str) -> Self {
        self.options.push((key.to_string(), value.to_string()));
        self
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
    /// The last `next` failed: a receive into a registered buffer may still be landing.
    unsettled: bool,
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
    /// The sender aborted the current update; the previous weights stand.
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
    /// registered, and while the last [`Self::next`] failed (a receive may still be landing in
    /// the buffers then; a successful `next` settles it, dropping the receiver ends it).
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
        self.unsettled = st != sys::WSYNC_OK;
        check(st)?;
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

    /// Confirm that `version` (from the last Commit event) is applied.
    pub fn commit(&mut self, version: u64) -> Result<()> {
        // SAFETY: a live receiver.
        check(unsafe { sys::wsync_receiver_commit(self.raw, version) })
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
            (t, *ev.placed.add(i) != 0)
        };
        out.push(ReceivedTensor::new(raw, placed));
    }
    Ok(out)
}

/// Descriptors in an array step by their first element's struct_size (wsync.h), which must cover
/// every field this crate reads.
fn ev_step(ev: &sys::wsync_receiver_event_t) -> Result<usize> {
    // SAFETY: at least one descriptor (checked by the caller).
    let size = unsafe { (*ev.tensors).struct_size } as usize;
    if size < sys::WSYNC_TENSOR_STRUCT_SIZE as usize {
        return Err(Error::VersionMismatch(format!(
            "tensor descriptors of {size} bytes; this crate reads 112"
        )));
    }
    Ok(size)
}

impl Drop for Receiver {
    fn drop(&mut self) {
        // SAFETY: destroy accepts the pointer init returned, once, and never fails.
        unsafe { sys::wsync_receiver_destroy(self.raw) };
    }
}
