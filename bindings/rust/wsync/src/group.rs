//! The sender half: a trainer's group.
use std::cell::Cell;
use std::ffi::CStr;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::error::{check, Result};
use crate::tensor::{raw_batch, Tensor};
use crate::util::{c_string_opt, check_abi, init_timeout_ms, ptr_or_null, timeout_ms, COptions};
use wsync_sys as sys;

/// How a group is made: [`Group::builder`], then [`GroupBuilder::init`].
#[derive(Debug, Clone, Default)]
pub struct GroupBuilder {
    num_receivers: u32,
    group_name: Option<String>,
    store_addr: Option<String>,
    transport: Option<String>,
    adapter: Option<String>,
    options: Vec<(String, String)>,
    timeout: Option<Duration>,
}

impl GroupBuilder {
    /// The group's name (default "wsync"); receivers must name the same.
    pub fn group_name(mut self, name: &str) -> Self {
        self.group_name = Some(name.to_string());
        self
    }

    /// "host:port" to host the rendezvous store on (default "127.0.0.1:0", a free port: see
    /// [`Group::store_addr`]).
    pub fn store_addr(mut self, addr: &str) -> Self {
        self.store_addr = Some(addr.to_string());
        self
    }

    /// The transport plugin's name or path (default: ucx on one host, tcp across hosts without RDMA).
    pub fn transport(mut self, transport: &str) -> Self {
        self.transport = Some(transport.to_string());
        self
    }

    /// The engine adapter plugin's name or path (default "native").
    pub fn adapter(mut self, adapter: &str) -> Self {
        self.adapter = Some(adapter.to_string());
        self
    }

    /// One group option (docs/ABI.md lists them: bucket_bytes, timeout_ms, ...; "transport.*" and
    /// "adapter.*" go to the plugins). Validated by init, which names an unknown key.
    pub fn option(mut self, key: &str, value: &str) -> Self {
        self.options.push((key.to_string(), value.to_string()));
        self
    }

    /// How long init waits for every receiver (default: the option timeout_ms, 60 s unless set).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// Create the group: load the plugins, host the store, wait until every receiver joined.
    pub fn init(self) -> Result<Group> {
        check_abi()?;
        let name = c_string_opt("group name", &self.group_name)?;
        let store = c_string_opt("store address", &self.store_addr)?;
        let transport = c_string_opt("transport", &self.transport)?;
        let adapter = c_string_opt("adapter", &self.adapter)?;
        let options = COptions::new(&self.options)?;
        let cfg = sys::wsync_group_config_t {
            num_receivers: self.num_receivers,
            group_name: ptr_or_null(&name),
            store_addr: ptr_or_null(&store),
            transport: ptr_or_null(&transport),
            adapter: ptr_or_null(&adapter),
            options: options.ptr(),
            num_options: options.len(),
            timeout_ms: init_timeout_ms(self.timeout),
            ..Default::default()
        };
        let mut raw = std::ptr::null_mut();
        // SAFETY: cfg and every string it points to live through the call, which copies them.
        check(unsafe { sys::wsync_group_init(&cfg, &mut raw) })?;
        Ok(Group { shared: Arc::new(Shared { raw: Mutex::new(raw) }), raw })
    }
}

/// The raw group, shared with the abort handles. The mutex holds NULL once the group is
/// destroyed, so an abort never races with destroy (the header forbids that).
struct Shared {
    raw: Mutex<*mut sys::wsync_group_t>,
}

// SAFETY: the pointer is used under the mutex by abort (safe from any thread) and destroy.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, *mut sys::wsync_group_t> {
        self.raw.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A trainer's group (rank 0): sends batches of tensors to every receiver, then commits them as
/// a weight version. Destroyed on drop: receivers are told the group closed.
///
/// Threading: the group moves between threads (`Send`) but is used from one at a time (not
/// `Sync`; every call takes `&mut self`), except [`AbortHandle::abort`], from any thread.
pub struct Group {
    shared: Arc<Shared>,
    raw: *mut sys::wsync_group_t,
}

// SAFETY: wsync allows any thread to call a group, one at a time; &mut self enforces one at a time.
unsafe impl Send for Group {}

/// Counters of a group (wsync_group_stats_t).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GroupStats {
    /// Receivers in the group.
    pub num_receivers: u32,
    /// 0 before the first finalize.
    pub committed_version: u64,
    /// Finalized updates.
    pub updates: u64,
    /// Delivered batches, over all updates.
    pub batches: u64,
    /// Buckets moved, over all updates.
    pub buckets: u64,
    /// Tensors sent (a split tensor counts once).
    pub tensors: u64,
    /// Tensor bytes sent per receiver.
    pub bytes: u64,
    /// Host staging memory held by the group.
    pub staging_bytes: u64,
    /// Wall time batches were in flight (overlapping batches count once).
    pub send_seconds: f64,
    /// CUDA staging memory held by the group.
    pub device_staging_bytes: u64,
    /// Many senders: ownership plans computed (a batch whose plan repeats reuses it).
    pub plans_computed: u64,
    /// Receivers in the group now (option membership=elastic removes those that fail).
    pub members: u32,
    /// Receivers removed since init.
    pub members_left: u32,
}

/// A receiver that left or joined the group ([`Group::member_events`]; option `membership=elastic`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberEvent {
    /// It left (true), or joined between updates (false: status "WSYNC_OK", update = the first it takes part in).
    pub left: bool,
    /// Its rank.
    pub rank: u32,
    /// What removed it: "WSYNC_ERR_PEER_FAILED", "WSYNC_ERR_TIMEOUT", or its refusal's status ("WSYNC_OK" for a join).
    pub status: &'static str,
    /// The update it left in (1 for the first), or the first one it takes part in.
    pub update: u64,
    /// What happened, naming the receiver.
    pub reason: String,
}

impl Group {
    /// A builder for a group of `num_receivers` receivers (ranks 1..=num_receivers).
    pub fn builder(num_receivers: u32) -> GroupBuilder {
        GroupBuilder { num_receivers, ..Default::default() }
    }

    /// "host:port" the group's store listens on (the port picked when asked for port 0).
    pub fn store_addr(&self) -> String {
        // SAFETY: lives as long as the group.
        let p = unsafe { sys::wsync_group_store_addr(self.raw) };
        if p.is_null() {
            return String::new();
        }
        // SAFETY: NUL-terminated, alive while self is.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }

    /// Send one batch of the current update to every receiver and wait until each acknowledged
    /// it. The tensors are borrowed only during the call. `timeout` bounds each wait for a
    /// receiver (None: the group's timeout_ms option). After a failure the update is broken:
    /// drop the group.
    pub fn send(&mut self, tensors: &[Tensor<'_>], timeout: Option<Duration>) -> Result<()> {
        let raw = raw_batch(tensors);
        // SAFETY: descriptors, names and memory are alive and unchanged during the call.
        check(unsafe {
            sys::wsync_group_send_batch(self.raw, raw.as_ptr(), raw.len() as u64, timeout_ms(timeout))
        })
    }

    /// The asynchronous send. Inside `f`, [`Pipeline::start`] starts batches that move while `f`
    /// produces the next; their memory must outlive the call to `pipeline` (`'env`), because
    /// `pipeline` waits for every batch it started before it returns, also when `f` fails or
    /// panics. This is how the borrow checker keeps tensors alive while they are in flight, even
    /// when a [`SendHandle`] is leaked (as `std::thread::scope` does for threads).
    ///
    /// Returns what `f` returned; when `f` succeeded but a batch it did not wait for failed, that
    /// failure.
    ///
    /// ```no_run
    /// # fn f(g: &mut wsync::Group, layers: &[Vec<f32>]) -> wsync::Result<()> {
    /// let tensors: Vec<wsync::Tensor> = layers
    ///     .iter()
    ///     .enumerate()
    ///     .map(|(i, w)| wsync::Tensor::new(&format!("layer{i}"), &[w.len() as i64], w))
    ///     .collect::<wsync::Result<_>>()?;
    /// g.pipeline(|p| {
    ///     for batch in tensors.chunks(64) {
    ///         p.start(batch, None)?; // moves while the next batch is prepared
    ///     }
    ///     Ok(())
    /// })?; // every batch is released here (its tensors are free); finalize delivers
    /// g.finalize(1, None)
    /// # }
    /// ```
    ///
    /// Memory made inside the closure does not live long enough to be sent asynchronously:
    ///
    /// ```compile_fail
    /// # fn f(g: &mut wsync::Group) -> wsync::Result<()> {
    /// g.pipeline(|p| {
    ///     let local = vec![0f32; 4]; // freed when the closure returns, maybe still in flight
    ///     let t = wsync::Tensor::new("w", &[4], &local)?;
    ///     p.start(&[t], None)?;
    ///     Ok(())
    /// })
    /// # }
    /// ```
    pub fn pipeline<'env, R, F>(&mut self, f: F) -> Result<R>
    where
        F: for<'p> FnOnce(&'p Pipeline<'p, 'env>) -> Result<R>,
    {
        let p = Pipeline { raw: self.raw, last: Cell::new(0), _scope: PhantomData, _env: PhantomData };
        let drain = Drain(&p);
        let r = f(&p);
        std::mem::forget(drain);
        let drained = p.drain();
        match (r, drained) {
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(e),
            (Ok(v), Ok(())) => Ok(v),
        }
    }

    /// Close the current update as weight version `version` (greater than the last committed):
    /// every receiver commits and confirms before this returns.
    pub fn finalize(&mut self, version: u64, timeout: Option<Duration>) -> Result<()> {
        // SAFETY: a live group.
        check(unsafe { sys::wsync_group_finalize(self.raw, version, timeout_ms(timeout)) })
    }

    /// The ranks of the receivers in the group now, ascending (option `membership=elastic`
    /// removes those that fail; ABI 1.5).
    pub fn members(&self) -> Result<Vec<u32>> {
        let mut count = 0u64;
        // SAFETY: a live group; no array with capacity 0.
        check(unsafe { sys::wsync_group_members(self.raw, std::ptr::null_mut(), 0, &mut count) })?;
        let mut ranks = vec![0u32; count as usize];
        // SAFETY: a live group and an array of `count` ranks.
        check(unsafe { sys::wsync_group_members(self.raw, ranks.as_mut_ptr(), count, &mut count) })?;
        ranks.truncate(count as usize);
        Ok(ranks)
    }

    /// Every member event not taken yet, oldest first (never blocks; ABI 1.5).
    pub fn member_events(&mut self) -> Result<Vec<MemberEvent>> {
        let mut out = Vec::new();
        loop {
            let mut e = sys::wsync_member_event_t::default();
            // SAFETY: a live group, a struct of the size we declare.
            let st = unsafe { sys::wsync_group_next_member_event(self.raw, &mut e) };
            if st == sys::WSYNC_ERR_NOT_FOUND {
                return Ok(out);
            }
            check(st)?;
            // SAFETY: the group owns the reason until its next call; copied now.
            let reason = if e.reason.is_null() {
                String::new()
            } else {
                unsafe { std::ffi::CStr::from_ptr(e.reason) }.to_string_lossy().into_owned()
            };
            out.push(MemberEvent {
                left: e.kind == sys::WSYNC_MEMBER_LEFT,
                rank: e.rank,
                // SAFETY: wsync_status_name returns a static string.
                status: unsafe { crate::error::static_str(sys::wsync_status_name(e.status)) },
                update: e.update,
                reason,
            });
        }
    }

    /// The group's counters.
    pub fn stats(&self) -> Result<GroupStats> {
        let mut s = sys::wsync_group_stats_t::default();
        // SAFETY: a live group, a struct of the size we declare.
        check(unsafe { sys::wsync_group_get_stats(self.raw, &mut s) })?;
        Ok(GroupStats {
            num_receivers: s.num_receivers,
            committed_version: s.committed_version,
            updates: s.updates,
            batches: s.batches,
            buckets: s.buckets,
            tensors: s.tensors,
            bytes: s.bytes,
            staging_bytes: s.staging_bytes,
            send_seconds: s.send_seconds,
            device_staging_bytes: s.device_staging_bytes,
            plans_computed: s.plans_computed,
            members: s.members,
            members_left: s.members_left,
        })
    }

    /// The cudaStream_t (as a raw pointer) that produces the CUDA tensors of the following sends;
    /// null = the legacy default stream.
    ///
    /// # Safety
    /// `stream` must be a valid CUDA stream of this process (or null) while it is set.
    pub unsafe fn set_cuda_stream(&mut self, stream: *mut std::os::raw::c_void) -> Result<()> {
        check(sys::wsync_group_set_cuda_stream(self.raw, stream))
    }

    /// A handle that aborts this group from any thread (cheap to clone; does nothing once the
    /// group is dropped).
    pub fn abort_handle(&self) -> AbortHandle {
        AbortHandle { shared: Arc::clone(&self.shared) }
    }

    /// Abort now: the call in progress elsewhere and every later send and finalize fail with
    /// [`Error::Aborted`].
    pub fn abort(&self) {
        self.abort_handle().abort()
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        // Hide the group from the abort handles first (under their lock), then destroy it without
        // the lock: an abort from now on does nothing, and none is running.
        *self.shared.lock() = std::ptr::null_mut();
        // SAFETY: destroy accepts the pointer init returned, once; no abort can reach it any more.
        unsafe { sys::wsync_group_destroy(self.raw) };
    }
}

/// Aborts a group from any thread: `Send + Sync + Clone`, and harmless after the group is gone.
#[derive(Clone)]
pub struct AbortHandle {
    shared: Arc<Shared>,
}

impl AbortHandle {
    /// Make any call in progress on the group return [`Error::Aborted`] soon (within ~100 ms), and
    /// every later send and finalize. Receivers in the middle of an update are told (the update
    /// never commits). Idempotent; a no-op once the group is dropped.
    pub fn abort(&self) {
        let raw = self.shared.lock();
        if !raw.is_null() {
            // SAFETY: a live group (destroy waits for this lock); abort is safe from any thread.
            unsafe { sys::wsync_group_abort(*raw) };
        }
    }
}

/// The asynchronous send of one [`Group::pipeline`] call. Not `Send`: used on the thread that
/// called `pipeline`.
pub struct Pipeline<'p, 'env> {
    raw: *mut sys::wsync_group_t,
    last: Cell<u64>,
    _scope: PhantomData<&'p ()>,
    /// Invariant in 'env, so tensors made inside the closure cannot pass for 'env ones.
    _env: PhantomData<Cell<&'env ()>>,
}

/// One batch in flight, from [`Pipeline::start`].
#[derive(Debug)]
pub struct SendHandle<'p> {
    raw: *mut sys::wsync_group_t,
    ticket: u64,
    _scope: PhantomData<&'p ()>,
}

impl<'p, 'env> Pipeline<'p, 'env> {
    /// Start moving one batch and return at once; the tensors' memory stays borrowed (for
    /// `'env`) until the pipeline ends. When `staging_buckets` batches (default 2) are in flight,
    /// first waits up to `timeout` for the oldest. A refusal starts nothing and leaves the group
    /// usable.
    pub fn start(&'p self, tensors: &[Tensor<'env>], timeout: Option<Duration>) -> Result<SendHandle<'p>> {
        let raw = raw_batch(tensors);
        let mut ticket = 0u64;
        // SAFETY: descriptors and names are copied during the call; the memory is borrowed for
        // 'env, which outlives the pipeline call, and pipeline waits for every batch before it
        // returns.
        check(unsafe {
            sys::wsync_group_send_start(
                self.raw,
                raw.as_ptr(),
                raw.len() as u64,
                timeout_ms(timeout),
                &mut ticket,
            )
        })?;
        self.last.set(ticket);
        Ok(SendHandle { raw: self.raw, ticket, _scope: PhantomData })
    }

    /// Wait for every batch started so far; never gives up while wsync says "not yet" (wsync
    /// reports a receiver that stopped answering as a failure, so this ends).
    fn drain(&self) -> Result<()> {
        let last = self.last.get();
        if last == 0 {
            return Ok(());
        }
        loop {
            // SAFETY: a live group and a ticket it handed out.
            let st = unsafe { sys::wsync_group_send_wait(self.raw, last, -1) };
            if st != sys::WSYNC_ERR_TIMEOUT {
                return check(st);
            }
        }
    }
}

impl SendHandle<'_> {
    /// The batch's number within the group (1, 2, ...).
    pub fn ticket(&self) -> u64 {
        self.ticket
    }

    /// Wait up to `timeout` (None: the group's timeout_ms option; zero: just look) for the batch:
    /// `Ok(true)` released (wsync no longer reads its tensors; `finalize` waits for delivery),
    /// `Ok(false)` still borrowed, `Err` it (or an earlier batch) failed or the group was aborted;
    /// the group is then broken.
    pub fn wait(&self, timeout: Option<Duration>) -> Result<bool> {
        // SAFETY: a live group (the pipeline borrows it) and a ticket it handed out.
        match unsafe { sys::wsync_group_send_wait(self.raw, self.ticket, timeout_ms(timeout)) } {
            sys::WSYNC_ERR_TIMEOUT => Ok(false),
            st => check(st).map(|_| true),
        }
    }
}

/// Waits for the pipeline's batches when its closure unwinds.
struct Drain<'a, 'p, 'env>(&'a Pipeline<'p, 'env>);

impl Drop for Drain<'_, '_, '_> {
    fn drop(&mut self) {
        let _ = self.0.drain();
    }
}
