//! Raw declarations of wsync's C ABI, `include/wsync.h` at ABI 1.6, written by hand (no bindgen:
//! the crate builds with std only). `tests/layout.rs` compiles a C program against the header and
//! checks every struct's size and field offsets, every constant and the list of functions
//! against these declarations. Everything here is `unsafe` to use; the `wsync` crate is the safe
//! layer. Comments are brief: the header is the contract.
#![allow(non_camel_case_types)]

use std::marker::{PhantomData, PhantomPinned};
pub use std::os::raw::{c_char, c_void};
use std::ptr;

// ---- Versions --------------------------------------------------------------------------------

pub const WSYNC_ABI_VERSION_MAJOR: u32 = 1;
pub const WSYNC_ABI_VERSION_MINOR: u32 = 6;
pub const WSYNC_ABI_VERSION: u32 = (WSYNC_ABI_VERSION_MAJOR << 16) | WSYNC_ABI_VERSION_MINOR;

// ---- Timeouts (wsync.h's one rule) -----------------------------------------------------------

/// The group's or receiver's "timeout_ms" option (any negative value).
pub const WSYNC_TIMEOUT_DEFAULT: i32 = -1;
/// Do not block where the call can answer "not yet"; elsewhere the default.
pub const WSYNC_TIMEOUT_NO_WAIT: i32 = 0;

// ---- Status codes ----------------------------------------------------------------------------

pub type wsync_status_t = i32;

pub const WSYNC_OK: wsync_status_t = 0;
pub const WSYNC_ERR_INVALID_ARGUMENT: wsync_status_t = 1;
pub const WSYNC_ERR_NOT_FOUND: wsync_status_t = 2;
pub const WSYNC_ERR_VERSION_MISMATCH: wsync_status_t = 3;
pub const WSYNC_ERR_UNSUPPORTED: wsync_status_t = 4;
pub const WSYNC_ERR_TIMEOUT: wsync_status_t = 5;
pub const WSYNC_ERR_ABORTED: wsync_status_t = 6;
pub const WSYNC_ERR_PROTOCOL: wsync_status_t = 7;
pub const WSYNC_ERR_IO: wsync_status_t = 8;
pub const WSYNC_ERR_PEER_FAILED: wsync_status_t = 9;
pub const WSYNC_ERR_OUT_OF_MEMORY: wsync_status_t = 10;
pub const WSYNC_ERR_INVALID_STATE: wsync_status_t = 11;
pub const WSYNC_ERR_ENGINE: wsync_status_t = 12;
pub const WSYNC_ERR_INTERNAL: wsync_status_t = 13;
pub const WSYNC_ERR_NO_DEVICE: wsync_status_t = 14;
pub const WSYNC_ERR_REJECTED: wsync_status_t = 15;
pub const WSYNC_STATUS_COUNT: wsync_status_t = 16;

// ---- Logging ---------------------------------------------------------------------------------

pub const WSYNC_LOG_ERROR: i32 = 1;
pub const WSYNC_LOG_WARN: i32 = 2;
pub const WSYNC_LOG_INFO: i32 = 3;
pub const WSYNC_LOG_DEBUG: i32 = 4;
pub const WSYNC_LOG_TRACE: i32 = 5;

/// Receives one formatted message; called from any wsync thread, concurrently.
pub type wsync_log_fn =
    Option<unsafe extern "C" fn(user_data: *mut c_void, level: i32, message: *const c_char)>;

// ---- Options ---------------------------------------------------------------------------------

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_option_t {
    pub struct_size: u32,
    pub reserved0: u32,
    pub key: *const c_char,
    pub value: *const c_char,
}
pub const WSYNC_OPTION_STRUCT_SIZE: u32 = 24;

// ---- Tensors ---------------------------------------------------------------------------------

pub const WSYNC_DTYPE_INVALID: i32 = 0;
pub const WSYNC_DTYPE_BOOL: i32 = 1;
pub const WSYNC_DTYPE_INT8: i32 = 2;
pub const WSYNC_DTYPE_INT16: i32 = 3;
pub const WSYNC_DTYPE_INT32: i32 = 4;
pub const WSYNC_DTYPE_INT64: i32 = 5;
pub const WSYNC_DTYPE_UINT8: i32 = 6;
pub const WSYNC_DTYPE_FLOAT16: i32 = 7;
pub const WSYNC_DTYPE_BFLOAT16: i32 = 8;
pub const WSYNC_DTYPE_FLOAT32: i32 = 9;
pub const WSYNC_DTYPE_FLOAT64: i32 = 10;
pub const WSYNC_DTYPE_FLOAT8_E4M3: i32 = 11;
pub const WSYNC_DTYPE_FLOAT8_E5M2: i32 = 12;
pub const WSYNC_DTYPE_COUNT: i32 = 13;

pub const WSYNC_DEVICE_CPU: i32 = 1;
pub const WSYNC_DEVICE_CUDA: i32 = 2;

pub const WSYNC_MAX_NDIM: usize = 8;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_tensor_t {
    pub struct_size: u32,
    pub dtype: i32,
    pub name: *const c_char,
    pub data: *mut c_void,
    pub nbytes: u64,
    pub ndim: i32,
    pub device_type: i32,
    pub device_index: i32,
    pub reserved0: i32,
    pub shape: [i64; WSYNC_MAX_NDIM],
    /// Since ABI 1.5: WSYNC_TENSOR_SLICE, WSYNC_TENSOR_REPLICA.
    pub flags: u32,
    pub reserved1: u32,
    /// Since ABI 1.5, with WSYNC_TENSOR_SLICE: the whole tensor's shape and the slice's offset in it.
    pub full_shape: [i64; WSYNC_MAX_NDIM],
    pub box_offset: [i64; WSYNC_MAX_NDIM],
}
pub const WSYNC_TENSOR_STRUCT_SIZE: u32 = 248;
/// Since ABI 1.5 (wsync_tensor_t.flags): the descriptor holds a box of the full tensor.
pub const WSYNC_TENSOR_SLICE: u32 = 1;
/// Since ABI 1.5: other senders hold the same box; it moves once, from the lowest sender rank.
pub const WSYNC_TENSOR_REPLICA: u32 = 2;

// ---- Sender half -----------------------------------------------------------------------------

/// Opaque group.
#[repr(C)]
pub struct wsync_group_t {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_group_config_t {
    pub struct_size: u32,
    pub num_receivers: u32,
    pub group_name: *const c_char,
    pub store_addr: *const c_char,
    pub transport: *const c_char,
    pub adapter: *const c_char,
    pub options: *const wsync_option_t,
    pub num_options: u64,
    pub timeout_ms: i64,
}
pub const WSYNC_GROUP_CONFIG_STRUCT_SIZE: u32 = 64;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_group_stats_t {
    pub struct_size: u32,
    pub num_receivers: u32,
    pub committed_version: u64,
    pub updates: u64,
    pub batches: u64,
    pub buckets: u64,
    pub tensors: u64,
    pub bytes: u64,
    pub staging_bytes: u64,
    pub send_seconds: f64,
    pub device_staging_bytes: u64,
    /// Since ABI 1.5: ownership plans computed (many senders).
    pub plans_computed: u64,
    /// Since ABI 1.5: receivers in the group now, and removed since init (membership=elastic).
    pub members: u32,
    pub members_left: u32,
}
pub const WSYNC_GROUP_STATS_STRUCT_SIZE: u32 = 96;

// ---- Receiver half ---------------------------------------------------------------------------

/// Opaque receiver.
#[repr(C)]
pub struct wsync_receiver_t {
    _private: [u8; 0],
    _marker: PhantomData<(*mut u8, PhantomPinned)>,
}

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_receiver_config_t {
    pub struct_size: u32,
    pub rank: u32,
    pub store_addr: *const c_char,
    pub group_name: *const c_char,
    pub transport: *const c_char,
    pub options: *const wsync_option_t,
    pub num_options: u64,
    pub timeout_ms: i64,
}
pub const WSYNC_RECEIVER_CONFIG_STRUCT_SIZE: u32 = 56;

pub const WSYNC_EVENT_NONE: i32 = 0;
pub const WSYNC_EVENT_BUCKET: i32 = 1;
pub const WSYNC_EVENT_COMMIT: i32 = 2;
pub const WSYNC_EVENT_CLOSED: i32 = 3;
pub const WSYNC_EVENT_ABORTED: i32 = 4;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_receiver_event_t {
    pub struct_size: u32,
    pub kind: i32,
    pub version: u64,
    pub bucket_index: u64,
    pub num_tensors: u64,
    pub tensors: *const wsync_tensor_t,
    pub placed: *const u8,
    pub bytes: u64,
}
pub const WSYNC_RECEIVER_EVENT_STRUCT_SIZE: u32 = 56;

pub const WSYNC_PLACED_VIEW: u8 = 0;
pub const WSYNC_PLACED_IN_PLACE: u8 = 1;
pub const WSYNC_PLACED_STAGED: u8 = 2;

pub const WSYNC_RECEIVE_IN_PLACE: i32 = 1;
pub const WSYNC_RECEIVE_STAGED: i32 = 2;
pub const WSYNC_BUFFERS_CLEAN: i32 = 1;
pub const WSYNC_BUFFERS_MIXED: i32 = 2;

/// Since ABI 1.4: what the updates did to a receiver's registered buffers.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_receiver_state_t {
    pub struct_size: u32,
    pub receive_mode: i32,
    pub committed_version: u64,
    pub pending_version: u64,
    pub buffers: i32,
    pub late_writes: i32,
    pub num_touched: u64,
    pub staged_bytes: u64,
    pub num_senders: u32,   // since 1.5
    pub planned: u32,       // since 1.5
    pub rank: u32,          // since 1.5
    pub rank_assigned: u32, // since 1.5
}
pub const WSYNC_RECEIVER_STATE_STRUCT_SIZE: u32 = 64;

/// Since ABI 1.5: a receiver joined the group between updates (option membership=elastic).
pub const WSYNC_MEMBER_JOINED: i32 = 1;
pub const WSYNC_MEMBER_LEFT: i32 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_member_event_t {
    pub struct_size: u32,
    pub kind: i32,
    pub rank: u32,
    pub status: wsync_status_t,
    pub update: u64,
    pub reason: *const c_char,
}
pub const WSYNC_MEMBER_EVENT_STRUCT_SIZE: u32 = 32;

// ---- Plugins ---------------------------------------------------------------------------------

pub const WSYNC_PLUGIN_KIND_TRANSPORT: i32 = 1;
pub const WSYNC_PLUGIN_KIND_ADAPTER: i32 = 2;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct wsync_plugin_info_t {
    pub struct_size: u32,
    pub kind: i32,
    pub name: *const c_char,
    pub path: *const c_char,
    pub version: *const c_char,
    pub detail: *const c_char,
    pub error: *const c_char,
    pub caps: u64,
    pub abi_major: u32,
    pub abi_minor: u32,
    pub status: wsync_status_t,
    pub shadowed: u32,
}
pub const WSYNC_PLUGIN_INFO_STRUCT_SIZE: u32 = 72;

// ---- The INIT macros -------------------------------------------------------------------------

impl Default for wsync_option_t {
    fn default() -> Self {
        wsync_option_t {
            struct_size: WSYNC_OPTION_STRUCT_SIZE,
            reserved0: 0,
            key: ptr::null(),
            value: ptr::null(),
        }
    }
}

impl Default for wsync_tensor_t {
    /// WSYNC_TENSOR_INIT.
    fn default() -> Self {
        wsync_tensor_t {
            struct_size: WSYNC_TENSOR_STRUCT_SIZE,
            dtype: WSYNC_DTYPE_INVALID,
            name: ptr::null(),
            data: ptr::null_mut(),
            nbytes: 0,
            ndim: 0,
            device_type: WSYNC_DEVICE_CPU,
            device_index: 0,
            reserved0: 0,
            shape: [0; WSYNC_MAX_NDIM],
            flags: 0,
            reserved1: 0,
            full_shape: [0; WSYNC_MAX_NDIM],
            box_offset: [0; WSYNC_MAX_NDIM],
        }
    }
}

impl Default for wsync_group_config_t {
    /// WSYNC_GROUP_CONFIG_INIT.
    fn default() -> Self {
        wsync_group_config_t {
            struct_size: WSYNC_GROUP_CONFIG_STRUCT_SIZE,
            num_receivers: 0,
            group_name: ptr::null(),
            store_addr: ptr::null(),
            transport: ptr::null(),
            adapter: ptr::null(),
            options: ptr::null(),
            num_options: 0,
            timeout_ms: -1,
        }
    }
}

impl Default for wsync_group_stats_t {
    /// WSYNC_GROUP_STATS_INIT.
    fn default() -> Self {
        wsync_group_stats_t {
            struct_size: WSYNC_GROUP_STATS_STRUCT_SIZE,
            num_receivers: 0,
            committed_version: 0,
            updates: 0,
            batches: 0,
            buckets: 0,
            tensors: 0,
            bytes: 0,
            staging_bytes: 0,
            send_seconds: 0.0,
            device_staging_bytes: 0,
            plans_computed: 0,
            members: 0,
            members_left: 0,
        }
    }
}

impl Default for wsync_receiver_config_t {
    /// WSYNC_RECEIVER_CONFIG_INIT.
    fn default() -> Self {
        wsync_receiver_config_t {
            struct_size: WSYNC_RECEIVER_CONFIG_STRUCT_SIZE,
            rank: 0,
            store_addr: ptr::null(),
            group_name: ptr::null(),
            transport: ptr::null(),
            options: ptr::null(),
            num_options: 0,
            timeout_ms: -1,
        }
    }
}

impl Default for wsync_receiver_event_t {
    /// WSYNC_RECEIVER_EVENT_INIT.
    fn default() -> Self {
        wsync_receiver_event_t {
            struct_size: WSYNC_RECEIVER_EVENT_STRUCT_SIZE,
            kind: WSYNC_EVENT_NONE,
            version: 0,
            bucket_index: 0,
            num_tensors: 0,
            tensors: ptr::null(),
            placed: ptr::null(),
            bytes: 0,
        }
    }
}

impl Default for wsync_member_event_t {
    /// WSYNC_MEMBER_EVENT_INIT.
    fn default() -> Self {
        wsync_member_event_t {
            struct_size: WSYNC_MEMBER_EVENT_STRUCT_SIZE,
            kind: 0,
            rank: 0,
            status: 0,
            update: 0,
            reason: std::ptr::null(),
        }
    }
}

impl Default for wsync_receiver_state_t {
    /// WSYNC_RECEIVER_STATE_INIT.
    fn default() -> Self {
        wsync_receiver_state_t {
            struct_size: WSYNC_RECEIVER_STATE_STRUCT_SIZE,
            receive_mode: 0,
            committed_version: 0,
            pending_version: 0,
            buffers: 0,
            late_writes: 0,
            num_touched: 0,
            staged_bytes: 0,
            num_senders: 0,
            planned: 0,
            rank: 0,
            rank_assigned: 0,
        }
    }
}

impl Default for wsync_plugin_info_t {
    /// WSYNC_PLUGIN_INFO_INIT.
    fn default() -> Self {
        wsync_plugin_info_t {
            struct_size: WSYNC_PLUGIN_INFO_STRUCT_SIZE,
            kind: 0,
            name: ptr::null(),
            path: ptr::null(),
            version: ptr::null(),
            detail: ptr::null(),
            error: ptr::null(),
            caps: 0,
            abi_major: 0,
            abi_minor: 0,
            status: WSYNC_OK,
            shadowed: 0,
        }
    }
}

// ---- Functions -------------------------------------------------------------------------------

extern "C" {
    pub fn wsync_abi_version() -> u32;
    pub fn wsync_version_string() -> *const c_char;

    pub fn wsync_status_name(status: wsync_status_t) -> *const c_char;
    pub fn wsync_status_doc(status: wsync_status_t) -> *const c_char;
    pub fn wsync_last_error() -> *const c_char;

    pub fn wsync_set_log_callback(func: wsync_log_fn, user_data: *mut c_void, max_level: i32);

    pub fn wsync_dtype_size(dtype: i32) -> u32;
    pub fn wsync_dtype_name(dtype: i32) -> *const c_char;

    pub fn wsync_group_init(
        config: *const wsync_group_config_t,
        out: *mut *mut wsync_group_t,
    ) -> wsync_status_t;
    pub fn wsync_group_store_addr(group: *const wsync_group_t) -> *const c_char;
    pub fn wsync_group_send_batch(
        group: *mut wsync_group_t,
        tensors: *const wsync_tensor_t,
        num_tensors: u64,
        timeout_ms: i64,
    ) -> wsync_status_t;
    pub fn wsync_group_send_start(
        group: *mut wsync_group_t,
        tensors: *const wsync_tensor_t,
        num_tensors: u64,
        timeout_ms: i64,
        ticket: *mut u64,
    ) -> wsync_status_t;
    pub fn wsync_group_send_wait(group: *mut wsync_group_t, ticket: u64, timeout_ms: i64) -> wsync_status_t;
    pub fn wsync_group_set_cuda_stream(group: *mut wsync_group_t, stream: *mut c_void) -> wsync_status_t;
    pub fn wsync_group_finalize(group: *mut wsync_group_t, version: u64, timeout_ms: i64) -> wsync_status_t;
    /// Since ABI 1.6: the whole next update, names, dtypes and full shapes (data not read).
    pub fn wsync_group_declare_update(
        group: *mut wsync_group_t,
        tensors: *const wsync_tensor_t,
        num_tensors: u64,
    ) -> wsync_status_t;
    pub fn wsync_group_abort(group: *mut wsync_group_t);
    pub fn wsync_group_get_stats(
        group: *const wsync_group_t,
        stats: *mut wsync_group_stats_t,
    ) -> wsync_status_t;
    pub fn wsync_group_destroy(group: *mut wsync_group_t);
    /// Since ABI 1.5.
    pub fn wsync_group_next_member_event(
        group: *mut wsync_group_t,
        event: *mut wsync_member_event_t,
    ) -> wsync_status_t;
    /// Since ABI 1.5.
    pub fn wsync_group_members(
        group: *const wsync_group_t,
        ranks: *mut u32,
        capacity: u64,
        count: *mut u64,
    ) -> wsync_status_t;

    pub fn wsync_receiver_init(
        config: *const wsync_receiver_config_t,
        out: *mut *mut wsync_receiver_t,
    ) -> wsync_status_t;
    pub fn wsync_receiver_register(
        rx: *mut wsync_receiver_t,
        buffers: *const wsync_tensor_t,
        num_buffers: u64,
    ) -> wsync_status_t;
    pub fn wsync_receiver_next(
        rx: *mut wsync_receiver_t,
        event: *mut wsync_receiver_event_t,
        timeout_ms: i64,
    ) -> wsync_status_t;
    pub fn wsync_receiver_commit(rx: *mut wsync_receiver_t, version: u64) -> wsync_status_t;
    pub fn wsync_receiver_committed_version(rx: *const wsync_receiver_t) -> u64;
    pub fn wsync_receiver_get_state(
        rx: *const wsync_receiver_t,
        state: *mut wsync_receiver_state_t,
    ) -> wsync_status_t;
    pub fn wsync_receiver_touched_name(rx: *const wsync_receiver_t, index: u64) -> *const c_char;
    pub fn wsync_receiver_destroy(rx: *mut wsync_receiver_t);

    pub fn wsync_plugin_dirs() -> *const c_char;
    pub fn wsync_list_plugins(
        infos: *mut wsync_plugin_info_t,
        capacity: u64,
        count: *mut u64,
    ) -> wsync_status_t;
}
