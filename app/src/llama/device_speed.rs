//! How fast a GPU-type device of llama.cpp's registry really is, measured
//! on the device through ggml itself, for a device the named-GPU table does
//! not know (Mesa's lavapipe, any unknown card): assuming such a device
//! reads at the RAM's bandwidth put lavapipe at 54 tok/s for the instruct
//! demo where it decodes at 0.4–0.5.
//!
//! Small graphs run on the device's own backend, each once to warm up
//! (pipelines are compiled at first use) and then timed, the fastest run
//! counting:
//! - a chain of tiny matrix-vector products: the fixed cost of one graph
//!   node (dispatch, barrier), which a decode pays some twenty times per
//!   layer;
//! - matrix-vector products over one and over k matrices of 9 MiB of Q4_0
//!   weights each: the difference is k − 1 matrices' reading, free of the
//!   graph's submission cost; k is 2 on a slow device, and 16 where one
//!   matrix reads in under 2 ms, so that a real GPU's last-level cache
//!   cannot hold what it reads.
//!
//! Prompt arithmetic is not measured: a 32-column product on lavapipe timed
//! at 0.7 GFLOP/s where a real 35-token prompt ran at 178 tok/s (48
//! GFLOP/s), so the probe's product is not the one llama.cpp's prompt
//! graph runs, and the prompt estimate keeps its assumed rule on the
//! measured bandwidth.
//!
//! On the 2-core test VM's lavapipe the probe takes about a second once
//! Mesa's shader cache holds its pipelines (9 s the very first time). It
//! runs in a child process ([`speed_of`] starts `headroom probe-device`),
//! so the device's start, buffers and pipelines (190 MB of RSS on lavapipe)
//! never count against the process that plans and loads.
//! The figures are cached per machine, llama.cpp build and device
//! (`device-speed-v1.json`, like the RAM bandwidth and the backends' start
//! cost), so one process measures and every later one plans alike.

use std::time::Instant;

use headroom_planner::hw::{LlamaDevice, MeasuredSpeed};
use llama_cpp_sys_2 as sys;

/// What one device measured.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    /// Bytes/s a matrix-vector product reads its weights at.
    pub bandwidth_bytes_per_s: f64,
    /// Seconds one graph node costs beyond its work.
    pub per_node_s: f64,
}

/// Each bandwidth matrix: 4096 × 4096 Q4_0 (9 MiB), a layer's matrix of a
/// 7B model.
const ROWS: i64 = 4096;
const COLS: i64 = 4096;
/// Matrices read where one takes under [`FAST_S`]: 144 MiB in all.
const MANY: usize = 16;
const FAST_S: f64 = 2e-3;
/// Nodes of the fixed-cost chain, each a 32 × 32 F32 product.
const CHAIN: usize = 16;
const TINY: i64 = 32;
/// Timed runs of each graph after its warm-up; the fastest counts.
const RUNS: usize = 2;

/// ggml contexts, their buffers and the backend of one device, freed on drop.
struct Bench {
    backend: sys::ggml_backend_t,
    ctxs: Vec<(*mut sys::ggml_context, sys::ggml_backend_buffer_t)>,
}

impl Drop for Bench {
    fn drop(&mut self) {
        // SAFETY: each handle was created by ggml in `measure` and is freed
        // once, here; null handles are skipped.
        unsafe {
            for &(ctx, buf) in &self.ctxs {
                if !buf.is_null() {
                    sys::ggml_backend_buffer_free(buf);
                }
                if !ctx.is_null() {
                    sys::ggml_free(ctx);
                }
            }
            if !self.backend.is_null() {
                sys::ggml_backend_free(self.backend);
            }
        }
    }
}

impl Bench {
    /// A context of `tensors` (type, columns, rows) allocated on the device
    /// and zeroed: the products' timing does not depend on the values, and
    /// zeros are valid in every type. Room is left for the products and
    /// graphs built on them.
    ///
    /// # Safety
    /// `self.backend` is a live backend.
    unsafe fn tensors(
        &mut self,
        tensors: &[(sys::ggml_type, i64, i64)],
    ) -> Option<Vec<*mut sys::ggml_tensor>> {
        // SAFETY: a no_alloc context holds metadata only; the backend
        // allocates the data in one buffer, freed with the context by drop.
        unsafe {
            let params = sys::ggml_init_params {
                mem_size: (4 * tensors.len() + 64) * sys::ggml_tensor_overhead()
                    + 2 * sys::ggml_graph_overhead(),
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            };
            let ctx = sys::ggml_init(params);
            if ctx.is_null() {
                return None;
            }
            let out: Vec<_> = tensors
                .iter()
                .map(|&(ty, cols, rows)| sys::ggml_new_tensor_2d(ctx, ty, cols, rows))
                .collect();
            let buf = sys::ggml_backend_alloc_ctx_tensors(ctx, self.backend);
            self.ctxs.push((ctx, buf));
            if buf.is_null() {
                return None;
            }
            sys::ggml_backend_buffer_clear(buf, 0);
            Some(out)
        }
    }

    /// The fastest of [`RUNS`] computations of the graph of the nodes
    /// `build` makes in a fresh context (their results allocated on the
    /// device), after one to warm up; `None` when the device refuses a node
    /// or fails.
    ///
    /// # Safety
    /// `self.backend` is live and `build` uses tensors of this bench.
    unsafe fn time(
        &mut self,
        build: impl FnOnce(*mut sys::ggml_context) -> Vec<*mut sys::ggml_tensor>,
    ) -> Option<f64> {
        // SAFETY: as `tensors`; the nodes and the graph live in a context
        // of their own, freed by drop with the buffer of their results.
        unsafe {
            let params = sys::ggml_init_params {
                mem_size: sys::ggml_graph_overhead() + 64 * sys::ggml_tensor_overhead(),
                mem_buffer: std::ptr::null_mut(),
                no_alloc: true,
            };
            let ctx = sys::ggml_init(params);
            if ctx.is_null() {
                return None;
            }
            self.ctxs.push((ctx, std::ptr::null_mut()));
            let outs = build(ctx);
            for &o in &outs {
                if o.is_null() || !sys::ggml_backend_supports_op(self.backend, o) {
                    return None;
                }
            }
            let buf = sys::ggml_backend_alloc_ctx_tensors(ctx, self.backend);
            if let Some(last) = self.ctxs.last_mut() {
                last.1 = buf;
            }
            if buf.is_null() {
                return None;
            }
            let g = sys::ggml_new_graph(ctx);
            for &o in &outs {
                sys::ggml_build_forward_expand(g, o);
            }
            let mut best = f64::INFINITY;
            let warm = Instant::now();
            for run in 0..=RUNS {
                let t0 = Instant::now();
                if sys::ggml_backend_graph_compute(self.backend, g) != sys::GGML_STATUS_SUCCESS {
                    return None;
                }
                sys::ggml_backend_synchronize(self.backend);
                if run > 0 {
                    best = best.min(t0.elapsed().as_secs_f64());
                } else {
                    tracing::debug!("warm-up {:.0} ms", warm.elapsed().as_secs_f64() * 1e3);
                }
            }
            (best.is_finite() && best > 0.0).then_some(best)
        }
    }
}

/// Times registry device `index` (its `ggml_backend_dev_get` index).
/// `None` when the device cannot be started, refuses an operation or
/// computes nothing measurable.
#[must_use]
pub fn measure(index: usize) -> Option<Measured> {
    super::backend::shared();
    let start = Instant::now();
    // SAFETY: ggml's C API used as documented (see `Bench`); the device
    // handle comes from the registry and lives as long as the process.
    unsafe {
        if index >= sys::ggml_backend_dev_count() {
            return None;
        }
        let dev = sys::ggml_backend_dev_get(index);
        let mut b = Bench {
            backend: sys::ggml_backend_dev_init(dev, std::ptr::null()),
            ctxs: Vec::new(),
        };
        if b.backend.is_null() {
            return None;
        }
        tracing::debug!(
            "device {index} started in {:.0} ms",
            start.elapsed().as_secs_f64() * 1e3
        );
        let q = sys::GGML_TYPE_Q4_0;
        let f = sys::GGML_TYPE_F32;
        let base = b.tensors(&[(q, COLS, ROWS), (f, COLS, 1), (f, TINY, TINY), (f, TINY, 1)])?;
        let [w, x, t, v] = base[..] else {
            return None;
        };
        let per_node_s = b.time(|ctx| {
            let mut chain = v;
            for _ in 0..CHAIN {
                chain = sys::ggml_mul_mat(ctx, t, chain);
            }
            vec![chain]
        })? / CHAIN as f64;
        let one_s = b.time(|ctx| vec![sys::ggml_mul_mat(ctx, w, x)])?;
        let k = if one_s < FAST_S { MANY } else { 2 };
        let more = b.tensors(&vec![(q, COLS, ROWS); k - 1])?;
        let k_s = b.time(|ctx| {
            std::iter::once(w)
                .chain(more.iter().copied())
                .map(|m| sys::ggml_mul_mat(ctx, m, x))
                .collect()
        })?;
        let extra_bytes = (k - 1) as f64 * sys::ggml_nbytes(w) as f64;
        // Each extra matrix is a node too; the difference is never taken
        // as under a tenth of the extra time.
        let extra_s = k_s - one_s;
        let reading = (extra_s - (k - 1) as f64 * per_node_s).max(extra_s / 10.0);
        if reading <= 0.0 {
            return None;
        }
        let m = Measured {
            bandwidth_bytes_per_s: extra_bytes / reading,
            per_node_s,
        };
        tracing::info!(
            "device {index}: {:.2} GB/s, {:.1} µs per node (1 matrix {:.2} ms, {k} {:.2} ms; {:.0} ms in all)",
            m.bandwidth_bytes_per_s / 1e9,
            per_node_s * 1e6,
            one_s * 1e3,
            k_s * 1e3,
            start.elapsed().as_secs_f64() * 1e3
        );
        Some(m)
    }
}

/// The registry index of the device llama.cpp names `name` (`Vulkan0`).
fn index_of(name: &str) -> Option<usize> {
    super::backend::shared();
    // SAFETY: registry handles live as long as the process; the name is a
    // NUL-terminated string ggml owns.
    unsafe {
        (0..sys::ggml_backend_dev_count()).find(|&i| {
            let n = sys::ggml_backend_dev_name(sys::ggml_backend_dev_get(i));
            !n.is_null() && std::ffi::CStr::from_ptr(n).to_str() == Ok(name)
        })
    }
}

/// The cache's key for a device: its backend and what the backend calls
/// it (the hardware, whichever number visibility gives it).
fn key_of(d: &LlamaDevice) -> String {
    format!("{} {}", d.backend, d.description)
}

/// The speed of registry device `d`: from `device-speed-v1.json` in
/// headroom's cache when this llama.cpp build measured it before, else
/// measured now ([`measure`], in a child process) and stored there; a
/// figure taken on a busy machine is measured again once it is quiet.
/// `None` when it cannot be measured.
#[must_use]
pub fn speed_of(d: &LlamaDevice) -> Option<MeasuredSpeed> {
    let path = crate::files::cache_dir()
        .ok()
        .map(|dir| dir.join("device-speed-v1.json"));
    let build = super::llama_cpp_version();
    let mut doc = path
        .as_deref()
        .and_then(|p| std::fs::read(p).ok())
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .filter(|v| v["build"] == build.as_str())
        .unwrap_or_else(|| serde_json::json!({ "build": build, "devices": {} }));
    let key = key_of(d);
    let entry = doc["devices"].get(&key).cloned();
    let cached = entry
        .clone()
        .and_then(|v| serde_json::from_value::<MeasuredSpeed>(v).ok());
    // As the RAM bandwidth: a figure taken while other work kept the cores
    // busy (lavapipe computes on them) is measured again on a quiet
    // machine, keeping the better of the two.
    let cached_busy = entry.is_some_and(|v| v["busy"] == true);
    let busy = headroom_planner::hw::bandwidth::machine_busy();
    if let Some(m) = cached
        && (!cached_busy || busy)
    {
        return Some(m);
    }
    let Some(fresh) = in_child(&d.name) else {
        return cached;
    };
    let m = cached.map_or(fresh, |c| MeasuredSpeed {
        bandwidth_bytes_per_s: c.bandwidth_bytes_per_s.max(fresh.bandwidth_bytes_per_s),
        per_node_ns: c.per_node_ns.min(fresh.per_node_ns),
    });
    if let (Some(p), Ok(mut v)) = (path, serde_json::to_value(m)) {
        v["busy"] = serde_json::Value::Bool(busy);
        doc["devices"][&key] = v;
        if let Some(dir) = p.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        // A cache that cannot be written only costs a measurement next time.
        let _ = crate::files::write(&p, doc.to_string().as_bytes());
    }
    Some(m)
}

/// What `headroom probe-device NAME` prints: the device's measured speed,
/// as JSON on one line; `None` (and nothing printed) when it cannot be
/// measured.
#[must_use]
pub fn probe_json(name: &str) -> Option<String> {
    let m = measure(index_of(name)?)?;
    let m = MeasuredSpeed {
        bandwidth_bytes_per_s: m.bandwidth_bytes_per_s as u64,
        per_node_ns: (m.per_node_s * 1e9) as u64,
    };
    serde_json::to_string(&m).ok()
}

/// How long the child may take: the very first probe on lavapipe, which
/// compiles Mesa's shader cache, took 9 s on the 2-core test VM.
const CHILD_LIMIT: std::time::Duration = std::time::Duration::from_secs(60);

/// Measures device `name` in a child process (this binary's hidden
/// `probe-device` command, with this process's environment, so the same
/// devices are visible), killed past [`CHILD_LIMIT`].
fn in_child(name: &str) -> Option<MeasuredSpeed> {
    let exe = std::env::current_exe().ok()?;
    let mut child = std::process::Command::new(exe)
        .args(["probe-device", name])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .ok()?;
    let started = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(_)) => break,
            Ok(None) if started.elapsed() < CHILD_LIMIT => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                tracing::warn!(
                    "measuring {name} took over {CHILD_LIMIT:?}: its speed stays assumed"
                );
                return None;
            }
        }
    }
    let out = child.wait_with_output().ok()?;
    if !out.status.success() {
        return None;
    }
    serde_json::from_slice(&out.stdout).ok()
}
