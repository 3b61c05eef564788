//! Tensors: element types, and descriptors that borrow the caller's memory.
use std::ffi::{CStr, CString};
use std::marker::PhantomData;
use std::os::raw::c_void;

use crate::error::{Error, Result};
use crate::util::c_string;
use wsync_sys as sys;

/// Element types (wsync's WSYNC_DTYPE_*, torch's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Dtype {
    /// bool
    Bool,
    /// int8
    Int8,
    /// int16
    Int16,
    /// int32
    Int32,
    /// int64
    Int64,
    /// uint8
    UInt8,
    /// float16 (IEEE half)
    Float16,
    /// bfloat16
    BFloat16,
    /// float32
    Float32,
    /// float64
    Float64,
    /// float8_e4m3fn
    Float8E4M3,
    /// float8_e5m2
    Float8E5M2,
}

impl Dtype {
    /// The WSYNC_DTYPE_* code.
    pub fn code(self) -> i32 {
        match self {
            Dtype::Bool => sys::WSYNC_DTYPE_BOOL,
            Dtype::Int8 => sys::WSYNC_DTYPE_INT8,
            Dtype::Int16 => sys::WSYNC_DTYPE_INT16,
            Dtype::Int32 => sys::WSYNC_DTYPE_INT32,
            Dtype::Int64 => sys::WSYNC_DTYPE_INT64,
            Dtype::UInt8 => sys::WSYNC_DTYPE_UINT8,
            Dtype::Float16 => sys::WSYNC_DTYPE_FLOAT16,
            Dtype::BFloat16 => sys::WSYNC_DTYPE_BFLOAT16,
            Dtype::Float32 => sys::WSYNC_DTYPE_FLOAT32,
            Dtype::Float64 => sys::WSYNC_DTYPE_FLOAT64,
            Dtype::Float8E4M3 => sys::WSYNC_DTYPE_FLOAT8_E4M3,
            Dtype::Float8E5M2 => sys::WSYNC_DTYPE_FLOAT8_E5M2,
        }
    }

    /// The Dtype of a WSYNC_DTYPE_* code; None for an unknown one.
    pub fn from_code(code: i32) -> Option<Dtype> {
        const ALL: [Dtype; 12] = [
            Dtype::Bool,
            Dtype::Int8,
            Dtype::Int16,
            Dtype::Int32,
            Dtype::Int64,
            Dtype::UInt8,
            Dtype::Float16,
            Dtype::BFloat16,
            Dtype::Float32,
            Dtype::Float64,
            Dtype::Float8E4M3,
            Dtype::Float8E5M2,
        ];
        ALL.iter().copied().find(|d| d.code() == code)
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        // SAFETY: thread-safe, never fails.
        unsafe { sys::wsync_dtype_size(self.code()) as usize }
    }

    /// torch's name: "bfloat16", "float8_e4m3fn", ...
    pub fn name(self) -> &'static str {
        // SAFETY: static storage.
        unsafe { crate::error::static_str(sys::wsync_dtype_name(self.code())) }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// Plain numeric types: any bit pattern is a valid value and there is no padding, so their
/// slices can be viewed as bytes ([`as_bytes`]) and written by the wire ([`crate::Receiver::register`]).
pub trait Pod: Copy + Send + Sync + 'static + sealed::Sealed {}

/// The Pod types with a wsync dtype of their own. For bf16, fp16 and fp8 weights, hold the bits
/// in `u16` / `u8` and name the dtype: [`Tensor::with_dtype`].
pub trait Element: Pod {
    /// The dtype this Rust type is.
    const DTYPE: Dtype;
}

macro_rules! pod {
    ($($t:ty),*) => { $(impl sealed::Sealed for $t {} impl Pod for $t {})* };
}
pod!(u8, i8, u16, i16, u32, i32, u64, i64, f32, f64);

macro_rules! element {
    ($($t:ty => $d:ident),*) => { $(impl Element for $t { const DTYPE: Dtype = Dtype::$d; })* };
}
element!(u8 => UInt8, i8 => Int8, i16 => Int16, i32 => Int32, i64 => Int64, f32 => Float32, f64 => Float64);

/// The bytes of a slice of plain numbers (no copy).
pub fn as_bytes<T: Pod>(data: &[T]) -> &[u8] {
    // SAFETY: T is Pod: no padding, every byte initialised; the length is the slice's in bytes.
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const u8, std::mem::size_of_val(data)) }
}

/// The bytes of a mutable slice of plain numbers (no copy).
pub fn as_bytes_mut<T: Pod>(data: &mut [T]) -> &mut [u8] {
    // SAFETY: as in as_bytes; any byte pattern written is a valid T.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr() as *mut u8, std::mem::size_of_val(data)) }
}

/// Where a tensor's memory is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Device {
    /// Host memory.
    Cpu,
    /// CUDA device memory of this process, by ordinal.
    Cuda(i32),
}

/// One tensor to send: a name, a dtype, a shape and memory borrowed for `'a` (a C-contiguous,
/// dense layout). Checked when made: the shape has at most 8 dimensions, none negative, and the
/// memory holds exactly product(shape) elements.
#[derive(Debug)]
pub struct Tensor<'a> {
    name: CString,
    raw: sys::wsync_tensor_t,
    _data: PhantomData<&'a [u8]>,
}

// SAFETY: a Tensor only reads memory it borrows shared (&'a [T] with T: Sync), or memory a caller
// of the unsafe constructor vouched for.
unsafe impl Send for Tensor<'_> {}
unsafe impl Sync for Tensor<'_> {}

impl<'a> Tensor<'a> {
    /// A tensor over a slice of a numeric type; its dtype is the type's.
    pub fn new<T: Element>(name: &str, shape: &[i64], data: &'a [T]) -> Result<Tensor<'a>> {
        Tensor::with_dtype(name, T::DTYPE, shape, as_bytes(data))
    }

    /// A tensor of any dtype over its raw bytes (bf16 weights as the bytes of a `&[u16]`, say):
    /// `data.len()` must be product(shape) * dtype.size().
    pub fn with_dtype(name: &str, dtype: Dtype, shape: &[i64], data: &'a [u8]) -> Result<Tensor<'a>> {
        // SAFETY: the memory is a live slice of exactly data.len() bytes, borrowed for 'a.
        unsafe {
            Tensor::from_raw(
                name,
                dtype,
                shape,
                data.as_ptr() as *const c_void,
                data.len() as u64,
                Device::Cpu,
            )
        }
    }

    /// A tensor over memory Rust cannot see, such as a CUDA allocation.
    ///
    /// # Safety
    /// `data` must point to `nbytes` readable bytes on `device`, laid out densely in C order,
    /// valid and not written by anyone for `'a` (and, for the asynchronous send, until the
    /// [`crate::Pipeline`] that sends it has ended).
    pub unsafe fn from_raw(
        name: &str,
        dtype: Dtype,
        shape: &[i64],
        data: *const c_void,
        nbytes: u64,
        device: Device,
    ) -> Result<Tensor<'a>> {
        let cname = c_string("tensor name", name)?;
        if shape.len() > sys::WSYNC_MAX_NDIM {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}' has {} dimensions; wsync takes at most {}",
                shape.len(),
                sys::WSYNC_MAX_NDIM
            )));
        }
        let mut elems: u64 = 1;
        for &d in shape {
            let d = u64::try_from(d).map_err(|_| {
                Error::InvalidArgument(format!("tensor '{name}' has a negative dimension in shape {shape:?}"))
            })?;
            elems = elems.checked_mul(d).ok_or_else(|| {
                Error::InvalidArgument(format!("tensor '{name}': shape {shape:?} overflows 64 bits"))
            })?;
        }
        let want = elems.checked_mul(dtype.size() as u64);
        if want != Some(nbytes) {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}': shape {shape:?} of {} needs {} bytes, the memory has {nbytes}",
                dtype.name(),
                want.map_or("more than 2^64".to_string(), |w| w.to_string())
            )));
        }
        let mut raw = sys::wsync_tensor_t {
            dtype: dtype.code(),
            name: cname.as_ptr(),
            data: data as *mut c_void,
            nbytes,
            ndim: shape.len() as i32,
            ..Default::default()
        };
        raw.shape[..shape.len()].copy_from_slice(shape);
        match device {
            Device::Cpu => raw.device_type = sys::WSYNC_DEVICE_CPU,
            Device::Cuda(i) => {
                raw.device_type = sys::WSYNC_DEVICE_CUDA;
                raw.device_index = i;
            }
        }
        Ok(Tensor { name: cname, raw, _data: PhantomData })
    }

    /// Since ABI 1.5 (many senders): this tensor is the box of a tensor of `full_shape` that
    /// starts at `offset` (one per dimension); its own shape is the box's extent and its memory
    /// the box's elements, dense in C order. Refused when the box does not fit, or when the
    /// library loaded is older than ABI 1.5 (it would send the slice as a whole tensor).
    pub fn slice(mut self, full_shape: &[i64], offset: &[i64]) -> Result<Tensor<'a>> {
        let name = self.name().to_string();
        let ndim = self.raw.ndim as usize;
        if full_shape.len() != ndim || offset.len() != ndim {
            return Err(Error::InvalidArgument(format!(
                "tensor '{name}': a slice of {ndim} dimensions needs a full shape and an offset of {ndim}, got {} and {}",
                full_shape.len(),
                offset.len()
            )));
        }
        for d in 0..ndim {
            let end = offset[d].checked_add(self.raw.shape[d]);
            if offset[d] < 0 || end.map_or(true, |e| e > full_shape[d]) {
                return Err(Error::InvalidArgument(format!(
                    "tensor '{name}': the slice at offset {offset:?} of extent {:?} does not fit in shape {full_shape:?}",
                    &self.raw.shape[..ndim]
                )));
            }
        }
        // SAFETY: a plain query with no arguments.
        let abi = unsafe { sys::wsync_abi_version() };
        if abi & 0xFFFF < 5 {
            return Err(Error::VersionMismatch(format!(
                "tensor '{name}': slices need libwsync ABI 1.5; the library loaded has ABI {}.{}",
                abi >> 16,
                abi & 0xFFFF
            )));
        }
        self.raw.flags |= sys::WSYNC_TENSOR_SLICE;
        self.raw.full_shape[..ndim].copy_from_slice(full_shape);
        self.raw.box_offset[..ndim].copy_from_slice(offset);
        Ok(self)
    }

    /// Since ABI 1.5: other senders hold the same box on purpose (data-parallel copies); it moves
    /// once, from the lowest sender rank that holds it.
    pub fn replica(mut self) -> Tensor<'a> {
        self.raw.flags |= sys::WSYNC_TENSOR_REPLICA;
        self
    }

    /// The name.
    pub fn name(&self) -> &str {
        self.name.to_str().unwrap_or("")
    }

    /// The descriptor (its name pointer lives as long as this Tensor; CString's buffer does not
    /// move when the Tensor does).
    pub(crate) fn raw(&self) -> sys::wsync_tensor_t {
        self.raw
    }
}

/// The descriptors of a batch, for one C call.
pub(crate) fn raw_batch(tensors: &[Tensor<'_>]) -> Vec<sys::wsync_tensor_t> {
    tensors.iter().map(Tensor::raw).collect()
}

/// A tensor that arrived, seen in an event: valid until the next [`crate::Receiver::next`].
#[derive(Debug, Clone, Copy)]
pub struct ReceivedTensor<'e> {
    raw: &'e sys::wsync_tensor_t,
    placed: u8,
}

impl<'e> ReceivedTensor<'e> {
    pub(crate) fn new(raw: &'e sys::wsync_tensor_t, placed: u8) -> Self {
        ReceivedTensor { raw, placed }
    }

    /// The name ("" if the library gave none or it is not UTF-8).
    pub fn name(&self) -> &'e str {
        if self.raw.name.is_null() {
            return "";
        }
        // SAFETY: a NUL-terminated name, valid for the event's lifetime.
        unsafe { CStr::from_ptr(self.raw.name) }.to_str().unwrap_or("")
    }

    /// The dtype; None for a code this crate does not know.
    pub fn dtype(&self) -> Option<Dtype> {
        Dtype::from_code(self.raw.dtype)
    }

    /// The shape.
    pub fn shape(&self) -> &'e [i64] {
        let n = (self.raw.ndim.max(0) as usize).min(sys::WSYNC_MAX_NDIM);
        &self.raw.shape[..n]
    }

    /// True when the bytes go to a buffer registered with [`crate::Receiver::register`]: written
    /// into it already (in place), or at [`crate::Receiver::commit`] ([`Self::staged`]).
    pub fn placed(&self) -> bool {
        self.placed != sys::WSYNC_PLACED_VIEW
    }

    /// True when the receiver stages registered tensors (`receive_mode` staged): the registered
    /// buffer gets the bytes at [`crate::Receiver::commit`]; until then it holds the previous ones.
    pub fn staged(&self) -> bool {
        self.placed == sys::WSYNC_PLACED_STAGED
    }

    /// Where the bytes are.
    pub fn device(&self) -> Device {
        if self.raw.device_type == sys::WSYNC_DEVICE_CUDA {
            Device::Cuda(self.raw.device_index)
        } else {
            Device::Cpu
        }
    }

    /// The bytes, for a tensor in host memory (None for CUDA memory: see [`Self::data_ptr`]).
    pub fn bytes(&self) -> Option<&'e [u8]> {
        if self.device() != Device::Cpu {
            return None;
        }
        if self.raw.nbytes == 0 {
            return Some(&[]);
        }
        if self.raw.data.is_null() || usize::try_from(self.raw.nbytes).is_err() {
            return None;
        }
        // SAFETY: the library describes nbytes readable bytes at data, valid until the next
        // wsync_receiver_next, which needs the &mut Receiver this event borrows.
        Some(unsafe { std::slice::from_raw_parts(self.raw.data as *const u8, self.raw.nbytes as usize) })
    }

    /// The raw address and length (for CUDA memory).
    pub fn data_ptr(&self) -> (*const c_void, u64) {
        (self.raw.data as *const c_void, self.raw.nbytes)
    }
}
