//! The samples' synthetic model (samples/common/synthetic_model.h), compiled in by build.rs: the
//! same tensors and bytes as the C trainer's, which the C++ sample engines verify.
use std::os::raw::{c_char, c_void};

use wsync::Dtype;

#[repr(C)]
#[derive(Clone, Copy)]
struct SynthTensor {
    name: [c_char; 128],
    dtype: i32,
    ndim: i32,
    shape: [i64; 8],
    nbytes: u64,
}

extern "C" {
    fn synth_model_spec(scale: f64, out: *mut SynthTensor, cap: usize) -> usize;
    fn synth_fill(t: *const SynthTensor, version: u64, dst: *mut c_void);
}

/// One tensor of the model: name, dtype, shape, and its bytes (in u64 words, as synth_fill writes).
pub struct Param {
    spec: SynthTensor,
    pub name: String,
    pub dtype: Dtype,
    pub shape: Vec<i64>,
    pub nbytes: usize,
    words: Vec<u64>,
}

impl Param {
    /// "Train a step": this tensor's contents at `version`.
    pub fn fill(&mut self, version: u64) {
        if self.nbytes > 0 {
            // SAFETY: words holds at least nbytes bytes, 8-aligned, as synth_fill needs.
            unsafe { synth_fill(&self.spec, version, self.words.as_mut_ptr() as *mut c_void) };
        }
    }

    /// The tensor's bytes.
    pub fn bytes(&self) -> &[u8] {
        &wsync::as_bytes(&self.words)[..self.nbytes]
    }
}

/// The model's tensors at `scale` (1.0: the ~1 GiB demo model).
pub fn model(scale: f64) -> Vec<Param> {
    let mut spec = vec![SynthTensor { name: [0; 128], dtype: 0, ndim: 0, shape: [0; 8], nbytes: 0 }; 1024];
    // SAFETY: a buffer of spec.len() entries.
    let n = unsafe { synth_model_spec(scale, spec.as_mut_ptr(), spec.len()) };
    spec.truncate(n);
    spec.into_iter()
        .map(|s| {
            let name: Vec<u8> = s.name.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
            Param {
                name: String::from_utf8(name).expect("a UTF-8 name"),
                dtype: Dtype::from_code(s.dtype).expect("a known dtype"),
                shape: s.shape[..s.ndim as usize].to_vec(),
                nbytes: s.nbytes as usize,
                words: vec![0u64; (s.nbytes as usize + 7) / 8],
                spec: s,
            }
        })
        .collect()
}
