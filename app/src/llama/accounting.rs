//! llama.cpp's own memory accounting, per backend buffer type.
//!
//! This is the ground truth the header-only planner is measured against. It
//! calls the C++ shim (`app/shim/accounting.cpp`), which does what llama.cpp's
//! `--fit` does: load the model with `no_alloc` (metadata only, no weights
//! read, nothing allocated), create a context, and read
//! `llama_get_memory_breakdown`.
//!
//! # What the numbers mean with `no_alloc`
//!
//! They are the sizes llama.cpp WOULD allocate with the same parameters:
//! * `model`: for each weight buffer type, `ggml_backend_alloc_ctx_tensors_from_buft_size`,
//!   i.e. the tensors' bytes each padded to the buffer type's alignment (and the
//!   repacked size for CPU_REPACK). A real load with mmap maps CPU weights from
//!   the file instead ("CPU_Mapped") — same bytes, but page cache, not anonymous
//!   memory.
//! * `context`: KV cache (or recurrent state) buffers, sized the same way.
//! * `compute`: the scheduler's compute buffers measured by reserving the
//!   worst-case graphs (prompt batch of `min(n_ctx, n_ubatch)` tokens, then a
//!   one-token graph) — exactly the size a real context would allocate.
//!
//! Not included by llama.cpp in the breakdown: the host output buffer
//! (logits, `n_vocab × max(n_seq_max, outputs requested) × 4` bytes, grown on
//! demand), ggml context metadata, the threadpool, and the process itself.

use super::error::{AbiError, AccountingError, LayoutMismatch};
use super::ffi;
use super::params::AccountingParams;
use super::usage::{Breakdown, BufferUse, ContextInfo, DeviceKind};
use std::ffi::{CStr, CString, c_char};
use std::path::Path;
use std::sync::OnceLock;

/// Rows to offer on the first call; llama.cpp uses one per buffer type
/// (CPU, CPU_REPACK, one or two per GPU), so 16 is ample and a larger need
/// only costs a retry.
const INITIAL_ROWS: usize = 16;
/// Error text buffer for the shim (it keeps the tail of llama.cpp's log).
const ERR_LEN: usize = 8192;

/// Asks llama.cpp how much memory `p` would take, one row per buffer type.
///
/// With `p.no_alloc` (the default) no weight is read: a sparse file with only
/// a valid header works. Serialised process-wide (two loads at once would
/// double the metadata they hold); llama.cpp's log lines are captured for
/// the calling thread only, so the engine can keep logging meanwhile.
pub fn memory_breakdown(p: &AccountingParams) -> anyhow::Result<Vec<BufferUse>> {
    Ok(breakdown(p)?.buffers)
}

/// Hand the heap the accounting load just freed (vocabulary, metadata: tens
/// of MB) back to the kernel. glibc keeps freed memory in the arena of the
/// thread that freed it; a real load on another thread (the chat's model
/// thread) could not reuse it and the process would peak that much higher
/// than planned.
fn release_freed_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the kernel.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Like [`memory_breakdown`] with the resolved context facts and a typed error.
pub fn breakdown(p: &AccountingParams) -> Result<Breakdown, AccountingError> {
    check_abi()?;
    // Initialisation only; the handle itself is not needed by the shim.
    let _ = super::backend::shared();

    let path_c = path_to_cstring(&p.path)?;
    let mut patterns = Vec::with_capacity(p.tensor_overrides.len());
    let mut bufts = Vec::with_capacity(p.tensor_overrides.len());
    for o in &p.tensor_overrides {
        let nul = || AccountingError::NulInOverride(format!("{}={}", o.pattern, o.buffer_type));
        patterns.push(CString::new(o.pattern.as_str()).map_err(|_| nul())?);
        bufts.push(CString::new(o.buffer_type.as_str()).map_err(|_| nul())?);
    }
    let pattern_ptrs: Vec<*const c_char> = patterns.iter().map(|s| s.as_ptr()).collect();
    let buft_ptrs: Vec<*const c_char> = bufts.iter().map(|s| s.as_ptr()).collect();

    let raw = ffi::HrParams {
        path: path_c.as_ptr(),
        n_gpu_layers: p.n_gpu_layers,
        main_gpu: p.main_gpu,
        split_mode: p.split_mode.raw(),
        // enum llama_load_mode: 1 = MMAP, 0 = NONE (the shim forces NONE with no_alloc).
        load_mode: i32::from(p.use_mmap),
        tensor_split: if p.tensor_split.is_empty() {
            std::ptr::null()
        } else {
            p.tensor_split.as_ptr()
        },
        n_tensor_split: p.tensor_split.len(),
        override_patterns: pattern_ptrs.as_ptr(),
        override_bufts: buft_ptrs.as_ptr(),
        n_overrides: pattern_ptrs.len(),
        use_extra_bufts: p.use_extra_bufts,
        no_host: p.no_host,
        no_alloc: p.no_alloc,
        forward_logs: p.forward_logs,
        n_ctx: p.n_ctx,
        n_batch: p.n_batch,
        n_ubatch: p.n_ubatch,
        n_seq_max: p.n_seq_max,
        n_outputs_max: p.n_outputs_max,
        type_k: ggml_type_raw(p.type_k),
        type_v: ggml_type_raw(p.type_v),
        flash_attn: super::params::flash_attn_raw(p.flash_attn),
        swa_full: p.swa_full,
        kv_unified: p.kv_unified,
        offload_kqv: p.offload_kqv,
        op_offload: p.op_offload,
        n_threads: p.n_threads,
    };

    let mut cap = INITIAL_ROWS;
    loop {
        let mut rows = vec![ffi::HrBuffer::ZERO; cap];
        let mut n_out = 0usize;
        let mut info = ffi::HrInfo::default();
        let mut err = vec![0 as c_char; ERR_LEN];
        // SAFETY: every pointer in `raw` points into locals (`path_c`, the
        // CString vectors and their pointer arrays, `p.tensor_split`) that
        // outlive this call; `rows` has `cap` elements; `err` has ERR_LEN bytes
        // and the shim always NUL-terminates within err_len. The shim catches
        // every C++ exception, so none unwinds into Rust.
        let status = unsafe {
            ffi::hr_memory_breakdown(
                &raw,
                rows.as_mut_ptr(),
                cap,
                &mut n_out,
                &mut info,
                err.as_mut_ptr(),
                err.len(),
            )
        };
        let detail = c_buf_to_string(&err);
        release_freed_heap();
        match status {
            ffi::HR_OK => {
                let n = n_out.min(cap);
                let mut buffers: Vec<BufferUse> = rows[..n].iter().map(row_to_use).collect();
                buffers.sort_by(|a, b| a.name.cmp(&b.name));
                return Ok(Breakdown {
                    buffers,
                    info: ContextInfo {
                        n_ctx: info.n_ctx,
                        n_ctx_train: info.n_ctx_train,
                        n_batch: info.n_batch,
                        n_ubatch: info.n_ubatch,
                        n_seq_max: info.n_seq_max,
                        n_layer: info.n_layer,
                        n_vocab: info.n_vocab,
                        n_params: info.n_params,
                        model_size: info.model_size,
                        flash_attn: match info.flash_attn {
                            0 => Some(false),
                            1 => Some(true),
                            _ => None,
                        },
                    },
                });
            }
            // Grow once to what the shim said it needs; a second refusal
            // would mean the count changed between two identical loads.
            ffi::HR_BUFFER_TOO_SMALL if n_out > cap => cap = n_out,
            ffi::HR_MODEL_LOAD => {
                return Err(AccountingError::ModelLoad {
                    path: p.path.clone(),
                    detail,
                });
            }
            ffi::HR_CONTEXT_INIT => {
                return Err(AccountingError::ContextInit {
                    path: p.path.clone(),
                    detail,
                });
            }
            ffi::HR_UNKNOWN_BUFT => return Err(AccountingError::UnknownBufferType(detail)),
            ffi::HR_BAD_ARGUMENT => return Err(AccountingError::BadArgument(detail)),
            ffi::HR_EXCEPTION => return Err(AccountingError::Exception(detail)),
            code => return Err(AccountingError::Unknown { code, detail }),
        }
    }
}

/// Verifies once per process that the linked shim has our ABI version and
/// struct layouts — every size and every field offset (a stale object or a
/// header edit without ffi.rs would otherwise corrupt memory silently).
pub(crate) fn check_abi() -> Result<(), AccountingError> {
    static CHECK: OnceLock<Result<(), AbiError>> = OnceLock::new();
    CHECK
        .get_or_init(|| {
            // SAFETY: no preconditions.
            let version = unsafe { ffi::hr_abi_version() };
            if version != ffi::HR_ABI_VERSION {
                return Err(AbiError::Version {
                    shim: version,
                    rust: ffi::HR_ABI_VERSION,
                });
            }
            let mismatches = compare_layouts(&c_layout(), &ffi::rust_layout());
            if mismatches.is_empty() {
                Ok(())
            } else {
                Err(AbiError::Layout(mismatches))
            }
        })
        .clone()
        .map_err(AccountingError::from)
}

/// The shim's `sizeof` / `offsetof` table, copied out of C.
fn c_layout() -> Vec<(String, usize)> {
    let mut n = 0usize;
    // SAFETY: `n` is a valid out-pointer; the table is static in the shim.
    let table = unsafe { ffi::hr_struct_layout(&mut n) };
    if table.is_null() {
        return Vec::new();
    }
    // SAFETY: the shim returns a static array of `n` entries.
    let entries = unsafe { std::slice::from_raw_parts(table, n) };
    entries
        .iter()
        .map(|e| {
            let name = if e.name.is_null() {
                String::new()
            } else {
                // SAFETY: each name is a static NUL-terminated string literal.
                unsafe { CStr::from_ptr(e.name) }
                    .to_string_lossy()
                    .into_owned()
            };
            (name, e.value)
        })
        .collect()
}

/// Every item whose value differs between the C++ and the Rust table, or
/// that only one of them has, in the order C lists them (then Rust's extras).
fn compare_layouts(c: &[(String, usize)], rust: &[(&str, usize)]) -> Vec<LayoutMismatch> {
    let mut out = Vec::new();
    for (name, value) in c {
        let ours = rust.iter().find(|(n, _)| n == name).map(|&(_, v)| v);
        if ours != Some(*value) {
            out.push(LayoutMismatch {
                item: name.clone(),
                c: Some(*value),
                rust: ours,
            });
        }
    }
    for &(name, value) in rust {
        if !c.iter().any(|(n, _)| n == name) {
            out.push(LayoutMismatch {
                item: name.to_string(),
                c: None,
                rust: Some(value),
            });
        }
    }
    out
}

fn path_to_cstring(path: &Path) -> Result<CString, AccountingError> {
    #[cfg(unix)]
    let bytes = {
        use std::os::unix::ffi::OsStrExt;
        path.as_os_str().as_bytes().to_vec()
    };
    // llama.cpp opens paths with fopen: on other platforms pass UTF-8.
    #[cfg(not(unix))]
    let bytes = path.to_string_lossy().into_owned().into_bytes();
    CString::new(bytes).map_err(|_| AccountingError::NulInPath {
        path: path.to_path_buf(),
    })
}

fn ggml_type_raw(t: llama_cpp_2::context::params::KvCacheType) -> i32 {
    let raw: llama_cpp_sys_2::ggml_type = t.into();
    // ggml type ids are small (< 64); a value that does not fit is passed as
    // -1, which llama.cpp rejects with an error rather than misreading.
    i32::try_from(raw).unwrap_or(-1)
}

/// Reads a NUL-terminated C string out of a fixed buffer (lossy UTF-8; an
/// unterminated buffer is read to its end).
pub(crate) fn c_buf_to_string(buf: &[c_char]) -> String {
    // SAFETY-free conversion: reinterpret c_char (i8 or u8) as bytes.
    let bytes: Vec<u8> = buf.iter().map(|&c| c as u8).collect();
    match CStr::from_bytes_until_nul(&bytes) {
        Ok(s) => s.to_string_lossy().into_owned(),
        Err(_) => String::from_utf8_lossy(&bytes).into_owned(),
    }
}

fn row_to_use(r: &ffi::HrBuffer) -> BufferUse {
    BufferUse {
        name: c_buf_to_string(&r.name),
        device: c_buf_to_string(&r.device),
        device_kind: DeviceKind::from_raw(r.device_type),
        model: r.model,
        context: r.context,
        compute: r.compute,
        is_host: r.is_host,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn abi_matches_the_compiled_shim() {
        check_abi().expect("shim and ffi.rs agree");
    }

    #[test]
    fn the_shim_reports_every_field_offset_not_only_sizes() {
        let c = c_layout();
        // A field's offset, not just a size, and the last field of the
        // largest struct: the table is complete enough to catch a reorder.
        assert!(
            c.iter().any(|(n, v)| n == "hr_params.n_threads" && *v > 0),
            "{c:?}"
        );
        assert_eq!(c.len(), ffi::rust_layout().len(), "{c:?}");
    }

    #[test]
    fn swapped_fields_of_equal_size_are_a_mismatch() {
        // Two u32 fields swapped on one side: sizes agree, offsets do not.
        let c = vec![
            ("hr_info".to_string(), 8),
            ("hr_info.n_ctx".to_string(), 0),
            ("hr_info.n_batch".to_string(), 4),
            ("hr_info.c_only".to_string(), 4),
        ];
        let rust = [
            ("hr_info", 8),
            ("hr_info.n_ctx", 4),
            ("hr_info.n_batch", 0),
            ("hr_info.rust_only", 4),
        ];
        let m = compare_layouts(&c, &rust);
        let items: Vec<(&str, Option<usize>, Option<usize>)> =
            m.iter().map(|m| (m.item.as_str(), m.c, m.rust)).collect();
        assert_eq!(
            items,
            vec![
                ("hr_info.n_ctx", Some(0), Some(4)),
                ("hr_info.n_batch", Some(4), Some(0)),
                ("hr_info.c_only", Some(4), None),
                ("hr_info.rust_only", None, Some(4)),
            ]
        );
        let msg = AccountingError::from(AbiError::Layout(m)).to_string();
        assert!(msg.contains("hr_info.n_ctx is 0 in C, 4 in Rust"), "{msg}");
        assert!(msg.contains("hr_info.c_only is in C only"), "{msg}");
    }

    #[test]
    fn missing_file_is_a_model_load_error_with_llama_cpp_reason() {
        let p = AccountingParams::for_model("/nonexistent/headroom-test.gguf");
        match breakdown(&p) {
            Err(AccountingError::ModelLoad { path, detail }) => {
                assert_eq!(path, PathBuf::from("/nonexistent/headroom-test.gguf"));
                assert!(
                    detail.contains("/nonexistent/headroom-test.gguf"),
                    "detail names the file: {detail}"
                );
                assert!(detail.contains("llama.cpp said"), "log captured: {detail}");
            }
            other => panic!("expected ModelLoad, got {other:?}"),
        }
    }

    #[test]
    fn unknown_override_buffer_type_names_the_known_ones() {
        let p = AccountingParams {
            tensor_overrides: vec![crate::llama::TensorOverride {
                pattern: "ffn_.*".into(),
                buffer_type: "NoSuchBuffer".into(),
            }],
            // Overrides are resolved before the model is opened.
            ..AccountingParams::for_model("/nonexistent/headroom-test.gguf")
        };
        match breakdown(&p) {
            Err(AccountingError::UnknownBufferType(msg)) => {
                assert!(msg.contains("NoSuchBuffer"), "{msg}");
                assert!(msg.contains("CPU"), "lists the known ones: {msg}");
            }
            other => panic!("expected UnknownBufferType, got {other:?}"),
        }
    }

    #[test]
    fn removed_cache_type_is_rejected_not_asserted() {
        use llama_cpp_2::context::params::KvCacheType;
        // ggml type id 4 (Q4_2) was removed: llama.cpp would abort on it.
        let p = AccountingParams {
            type_k: KvCacheType::Unknown(4),
            ..AccountingParams::for_model("/nonexistent/headroom-test.gguf")
        };
        match breakdown(&p) {
            Err(AccountingError::BadArgument(msg)) => {
                assert!(msg.contains("cache type (4, 1)"), "{msg}")
            }
            other => panic!("expected BadArgument, got {other:?}"),
        }
    }

    #[test]
    fn nul_in_path_is_rejected_before_ffi() {
        let p = AccountingParams::for_model("bad\0path.gguf");
        assert!(matches!(
            breakdown(&p),
            Err(AccountingError::NulInPath { .. })
        ));
    }

    #[test]
    fn c_buf_to_string_stops_at_nul_and_tolerates_no_nul() {
        let buf: Vec<c_char> = b"CPU\0junk".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_buf_to_string(&buf), "CPU");
        let buf: Vec<c_char> = b"CUDA0".iter().map(|&b| b as c_char).collect();
        assert_eq!(c_buf_to_string(&buf), "CUDA0");
    }

    #[test]
    fn totals_add_columns() {
        let b = Breakdown {
            buffers: vec![
                BufferUse {
                    name: "CPU".into(),
                    device: "CPU".into(),
                    device_kind: DeviceKind::Cpu,
                    model: 10,
                    context: 5,
                    compute: 1,
                    is_host: true,
                },
                BufferUse {
                    name: "CPU_REPACK".into(),
                    device: "CPU".into(),
                    device_kind: DeviceKind::Cpu,
                    model: 100,
                    context: 0,
                    compute: 0,
                    is_host: false,
                },
            ],
            info: ContextInfo::default(),
        };
        assert_eq!(b.total(), 116);
        assert_eq!(b.model_total(), 110);
        assert_eq!(b.get("CPU_REPACK").map(|r| r.model), Some(100));
        assert!(b.get("CUDA0").is_none());
        // CPU_REPACK is not "host" to ggml but is RAM for budgeting.
        assert!(b.buffers.iter().all(BufferUse::in_ram));
    }
}
