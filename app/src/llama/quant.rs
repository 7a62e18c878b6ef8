//! Which tensor types `llama-quantize` would choose, asked of llama.cpp itself.
//!
//! The synthetic models of `headroom_planner::synth` mirror llama.cpp's
//! quantization rules in Rust; this module runs the real rules
//! (`llama_quant_compute_types`, via the C++ shim) on the same tensor list so
//! tests can prove the mirror right, tensor by tensor.

use super::error::AccountingError;
use super::ffi;
use headroom_planner::gguf::GgmlType;
use std::ffi::{CString, c_char};

/// The hyper-parameters llama.cpp's quantizer looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantModel {
    /// Architecture name as in `general.architecture`.
    pub arch: String,
    /// Hidden size.
    pub n_embd: u32,
    /// Feed-forward size.
    pub n_ff: u32,
    /// Transformer blocks (1..=512).
    pub n_layer: u32,
    /// Query heads.
    pub n_head: u32,
    /// Key/value heads.
    pub n_head_kv: u32,
    /// Experts (0: dense).
    pub n_expert: u32,
    /// K head size.
    pub n_embd_head_k: u32,
    /// V head size.
    pub n_embd_head_v: u32,
}

/// One tensor as the quantizer sees it before quantization.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantTensor {
    /// GGUF tensor name.
    pub name: String,
    /// Dimensions, innermost first (1 to 4).
    pub dims: Vec<u64>,
    /// Type in the unquantized source (F32 for norms, F16/BF16/F32 otherwise).
    pub src_type: GgmlType,
}

/// The ggml type llama-quantize would write for each of `tensors` with file
/// type `ftype` (`enum llama_ftype`, e.g. 15 = Q4_K_M) and default options.
pub fn quant_types(
    model: &QuantModel,
    ftype: u32,
    tensors: &[QuantTensor],
) -> Result<Vec<GgmlType>, AccountingError> {
    super::accounting::check_abi()?;
    let bad = |what: String| AccountingError::BadArgument(what);
    let arch = CString::new(model.arch.as_str())
        .map_err(|_| bad(format!("architecture {:?} contains a NUL byte", model.arch)))?;
    let ftype = i32::try_from(ftype).map_err(|_| bad(format!("file type {ftype} out of range")))?;
    let names = tensors
        .iter()
        .map(|t| {
            CString::new(t.name.as_str())
                .map_err(|_| bad(format!("tensor name {:?} contains a NUL byte", t.name)))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut raw = Vec::with_capacity(tensors.len());
    for (t, name) in tensors.iter().zip(&names) {
        if t.dims.is_empty() || t.dims.len() > 4 {
            return Err(bad(format!(
                "tensor {} has {} dimensions",
                t.name,
                t.dims.len()
            )));
        }
        let mut ne = [1i64; 4];
        for (slot, &d) in ne.iter_mut().zip(&t.dims) {
            *slot = i64::try_from(d)
                .map_err(|_| bad(format!("tensor {} dimension {d} too large", t.name)))?;
        }
        raw.push(ffi::HrQuantTensor {
            name: name.as_ptr(),
            ne,
            // 1..=4, checked above.
            n_dims: t.dims.len() as i32,
            // ggml ids are < 64.
            src_type: t.src_type.id() as i32,
        });
    }
    let m = ffi::HrQuantModel {
        arch: arch.as_ptr(),
        n_embd: model.n_embd,
        n_ff: model.n_ff,
        n_layer: model.n_layer,
        n_head: model.n_head,
        n_head_kv: model.n_head_kv,
        n_expert: model.n_expert,
        n_embd_head_k: model.n_embd_head_k,
        n_embd_head_v: model.n_embd_head_v,
    };
    let mut out = vec![0i32; raw.len()];
    let mut err = vec![0 as c_char; 4096];
    // SAFETY: `m` and every `raw` entry point into CStrings alive until the
    // end of this function; `out` has `raw.len()` slots; `err` is NUL-terminated
    // by the shim within its length; the shim catches all C++ exceptions.
    let status = unsafe {
        ffi::hr_quant_types(
            &m,
            ftype,
            raw.as_ptr(),
            raw.len(),
            out.as_mut_ptr(),
            err.as_mut_ptr(),
            err.len(),
        )
    };
    let detail = super::accounting::c_buf_to_string(&err);
    match status {
        ffi::HR_OK => out
            .iter()
            .map(|&id| {
                u32::try_from(id)
                    .ok()
                    .and_then(GgmlType::from_id)
                    .ok_or_else(|| AccountingError::Unknown {
                        code: id,
                        detail: "llama.cpp chose an unknown tensor type".into(),
                    })
            })
            .collect(),
        ffi::HR_BAD_ARGUMENT => Err(AccountingError::BadArgument(detail)),
        ffi::HR_EXCEPTION => Err(AccountingError::Exception(detail)),
        code => Err(AccountingError::Unknown { code, detail }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn llama_model() -> QuantModel {
        QuantModel {
            arch: "llama".into(),
            n_embd: 4096,
            n_ff: 14336,
            n_layer: 32,
            n_head: 32,
            n_head_kv: 8,
            n_expert: 0,
            n_embd_head_k: 128,
            n_embd_head_v: 128,
        }
    }

    fn t(name: &str, dims: &[u64], src_type: GgmlType) -> QuantTensor {
        QuantTensor {
            name: name.into(),
            dims: dims.to_vec(),
            src_type,
        }
    }

    #[test]
    fn q4_k_m_keeps_norms_and_gives_output_q6_k() {
        let tensors = [
            t("output_norm.weight", &[4096], GgmlType::F32),
            t("output.weight", &[4096, 128_256], GgmlType::F16),
            t("blk.0.attn_q.weight", &[4096, 4096], GgmlType::F16),
            t("blk.0.attn_v.weight", &[4096, 1024], GgmlType::F16),
        ];
        let types = quant_types(&llama_model(), 15, &tensors).expect("llama.cpp answers");
        // Layer 0 of 32 is in the first eighth: attn_v gets more bits.
        assert_eq!(
            types,
            vec![
                GgmlType::F32,
                GgmlType::Q6_K,
                GgmlType::Q4_K,
                GgmlType::Q6_K
            ]
        );
    }

    #[test]
    fn unknown_architecture_is_an_error_not_a_crash() {
        let m = QuantModel {
            arch: "no-such-arch".into(),
            ..llama_model()
        };
        let r = quant_types(
            &m,
            15,
            &[t("blk.0.attn_q.weight", &[4096, 4096], GgmlType::F16)],
        );
        assert!(r.is_err(), "{r:?}");
    }

    #[test]
    fn zero_layers_is_rejected_before_llama_cpp_asserts() {
        let m = QuantModel {
            n_layer: 0,
            ..llama_model()
        };
        assert!(matches!(
            quant_types(&m, 15, &[]),
            Err(AccountingError::BadArgument(_))
        ));
    }
}
