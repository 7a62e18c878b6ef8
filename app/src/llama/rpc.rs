//! llama.cpp RPC workers (`ggml-rpc-server`) as devices.
//!
//! llama.cpp's RPC client aborts the process when a worker cannot be reached
//! (`GGML_ABORT("Failed to connect to …")`) and its connect has no timeout.
//! So every worker is probed here first, from Rust: a TCP connect and the RPC
//! `HELLO` exchange, each under a timeout. Only a worker that answers with a
//! protocol version this build speaks is handed to llama.cpp
//! (`ggml_backend_rpc_add_server` through the backend registry), whose devices
//! are then registered like local GPUs: llama.cpp puts them first in its
//! device list and splits offloaded layers over all GPUs in proportion to the
//! free memory each reports.
//!
//! A worker lost later (killed, network gone) still ends in `GGML_ABORT`
//! inside llama.cpp; [`install_abort_handler`] turns that into one line on
//! stderr and exit status 1, after the caller's cleanup (the chat restores
//! the terminal).

use std::ffi::{CStr, CString, c_char};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use llama_cpp_sys_2 as sys;

/// The RPC protocol this build's llama.cpp speaks (`ggml-rpc.h`).
pub const PROTO_MAJOR: u8 = 7;
/// The newest minor version of it the client accepts.
pub const PROTO_MINOR: u8 = 0;
/// `RPC_CMD_HELLO` (`ggml-rpc.cpp`; fixed at 14 for every protocol version).
const CMD_HELLO: u8 = 14;
/// `RPC_CONN_CAPS_SIZE` (`transport.h`): the capability bytes of a hello.
const CONN_CAPS: usize = 24;
/// How long a connect, and then the hello's answer, may take.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a worker cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum RpcError {
    /// Not `HOST:PORT`.
    #[error("RPC worker {0}: not HOST:PORT")]
    BadAddress(String),
    /// Not a loopback address, and the user did not say the network is trusted.
    #[error(
        "RPC worker {0} is not on this machine: llama.cpp's RPC protocol has no authentication \
         or encryption, so anyone who can reach a worker can run code on it and read what it \
         computes; pass --rpc-trust-network if this network is yours"
    )]
    Untrusted(String),
    /// No TCP connection within the timeout.
    #[error("RPC worker {endpoint} is unreachable: {why}")]
    Unreachable {
        /// `HOST:PORT`.
        endpoint: String,
        /// The socket error, in words.
        why: String,
    },
    /// Connected, but no valid hello.
    #[error("RPC worker {endpoint} did not answer as a llama.cpp RPC server: {why}")]
    NoHello {
        /// `HOST:PORT`.
        endpoint: String,
        /// What went wrong.
        why: String,
    },
    /// A worker of another protocol version.
    #[error(
        "RPC worker {endpoint} speaks RPC protocol {major}.{minor}.{patch}, this build \
         {PROTO_MAJOR}.{PROTO_MINOR}.x: build the worker from the same llama.cpp"
    )]
    Version {
        /// `HOST:PORT`.
        endpoint: String,
        /// The worker's version.
        major: u8,
        /// The worker's version.
        minor: u8,
        /// The worker's version.
        patch: u8,
    },
    /// This build has no RPC backend.
    #[error("this build of llama.cpp has no RPC backend (build with GGML_RPC=ON)")]
    NoBackend,
    /// llama.cpp could not add the worker.
    #[error("RPC worker {0}: llama.cpp could not add it ({1})")]
    Add(String, String),
}

/// One device of a worker, as llama.cpp sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Device {
    /// `HOST:PORT`.
    pub endpoint: String,
    /// llama.cpp's device name (`RPC0`, `RPC1`, … numbered across workers).
    pub name: String,
    /// The name of the device's buffers in llama.cpp's memory breakdown:
    /// `RPC<device on the worker>[HOST:PORT]`.
    pub buffer_name: String,
    /// Free memory the worker reports now: what llama.cpp splits layers by.
    pub free_bytes: u64,
    /// Total memory the worker reports.
    pub total_bytes: u64,
}

/// Splits a comma-separated `--rpc` list, checking each `HOST:PORT` and that
/// each is on this machine unless the network is trusted.
pub fn parse_endpoints(list: &str, trust_network: bool) -> Result<Vec<String>, RpcError> {
    let mut out = Vec::new();
    for e in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, port) = e
            .rsplit_once(':')
            .ok_or_else(|| RpcError::BadAddress(e.to_string()))?;
        if host.is_empty() || port.parse::<u16>().map_or(true, |p| p == 0) {
            return Err(RpcError::BadAddress(e.to_string()));
        }
        if !trust_network && !is_loopback(host) {
            return Err(RpcError::Untrusted(e.to_string()));
        }
        if !out.iter().any(|o| o == e) {
            out.push(e.to_string());
        }
    }
    if out.is_empty() {
        return Err(RpcError::BadAddress(list.to_string()));
    }
    Ok(out)
}

/// Whether `host` names this machine: `localhost`, or an address literal in
/// 127.0.0.0/8 or `::1`. A name that resolves to loopback is not enough (the
/// resolver is not ours to trust).
fn is_loopback(host: &str) -> bool {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.eq_ignore_ascii_case("localhost")
        || h.parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

fn resolve(endpoint: &str) -> Result<Vec<SocketAddr>, RpcError> {
    let addrs: Vec<SocketAddr> = endpoint
        .to_socket_addrs()
        .map_err(|e| RpcError::Unreachable {
            endpoint: endpoint.to_string(),
            why: e.to_string(),
        })?
        .collect();
    if addrs.is_empty() {
        return Err(RpcError::Unreachable {
            endpoint: endpoint.to_string(),
            why: "the name resolves to no address".into(),
        });
    }
    Ok(addrs)
}

/// Connects to a worker and exchanges the RPC hello, each step under
/// `timeout`; returns the worker's protocol version.
pub fn probe(endpoint: &str, timeout: Duration) -> Result<(u8, u8, u8), RpcError> {
    let unreachable = |why: String| RpcError::Unreachable {
        endpoint: endpoint.to_string(),
        why,
    };
    let no_hello = |why: String| RpcError::NoHello {
        endpoint: endpoint.to_string(),
        why,
    };
    let mut last = String::new();
    let mut stream = None;
    for addr in resolve(endpoint)? {
        match TcpStream::connect_timeout(&addr, timeout) {
            Ok(s) => {
                stream = Some(s);
                break;
            }
            Err(e) => last = e.to_string(),
        }
    }
    let mut s = stream.ok_or_else(|| unreachable(last))?;
    s.set_read_timeout(Some(timeout))
        .and_then(|()| s.set_write_timeout(Some(timeout)))
        .map_err(|e| unreachable(e.to_string()))?;
    // | cmd (1 byte) | request size (u64, little-endian) | request |
    let mut req = vec![CMD_HELLO];
    req.extend_from_slice(&(CONN_CAPS as u64).to_le_bytes());
    req.extend_from_slice(&[0u8; CONN_CAPS]); // no transport upgrade
    s.write_all(&req).map_err(|e| no_hello(e.to_string()))?;
    // | response size (u64) | major minor patch padding | caps |
    let mut size = [0u8; 8];
    s.read_exact(&mut size)
        .map_err(|e| no_hello(format!("no answer to the hello ({e})")))?;
    let size = u64::from_le_bytes(size);
    if size != 4 + CONN_CAPS as u64 {
        return Err(no_hello(format!("a hello answer of {size} bytes")));
    }
    let mut rsp = [0u8; 4 + CONN_CAPS];
    s.read_exact(&mut rsp)
        .map_err(|e| no_hello(format!("a short hello answer ({e})")))?;
    let (major, minor, patch) = (rsp[0], rsp[1], rsp[2]);
    if major != PROTO_MAJOR || minor > PROTO_MINOR {
        return Err(RpcError::Version {
            endpoint: endpoint.to_string(),
            major,
            minor,
            patch,
        });
    }
    Ok((major, minor, patch))
}

/// Devices already registered with llama.cpp, by endpoint: llama.cpp keeps
/// one registry per endpoint, and registering its devices twice would list
/// them twice.
fn registered() -> &'static Mutex<Vec<(String, Vec<Dev>)>> {
    static R: OnceLock<Mutex<Vec<(String, Vec<Dev>)>>> = OnceLock::new();
    R.get_or_init(|| Mutex::new(Vec::new()))
}

/// A device handle: an object llama.cpp creates once per worker device and
/// never frees; it is only passed back to llama.cpp.
#[derive(Clone, Copy)]
struct Dev(sys::ggml_backend_dev_t);
// SAFETY: see above; llama.cpp's device calls are thread-safe.
unsafe impl Send for Dev {}

fn cstr(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: llama.cpp returns NUL-terminated strings it owns.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

type AddServer = unsafe extern "C" fn(*const c_char) -> sys::ggml_backend_reg_t;

/// Probes every worker, then adds each to llama.cpp (once per process) and
/// returns its devices in llama.cpp's order, with the memory each reports now.
pub fn connect(endpoints: &[String]) -> Result<Vec<Device>, RpcError> {
    for e in endpoints {
        probe(e, PROBE_TIMEOUT)?;
    }
    super::backend::shared();
    install_abort_handler();
    let mut reg_list = registered().lock().unwrap_or_else(|p| p.into_inner());
    let mut out = Vec::new();
    for e in endpoints {
        let devs = if let Some((_, d)) = reg_list.iter().find(|(x, _)| x == e) {
            d.clone()
        } else {
            let d = add_server(e)?;
            reg_list.push((e.clone(), d.clone()));
            d
        };
        for (ind, &Dev(dev)) in devs.iter().enumerate() {
            let (mut free, mut total) = (0usize, 0usize);
            // SAFETY: `dev` is a registered device; the call asks the worker.
            unsafe { sys::ggml_backend_dev_memory(dev, &mut free, &mut total) };
            out.push(Device {
                endpoint: e.clone(),
                // SAFETY: as above.
                name: cstr(unsafe { sys::ggml_backend_dev_name(dev) }),
                buffer_name: format!("RPC{ind}[{e}]"),
                free_bytes: free as u64,
                total_bytes: total as u64,
            });
        }
    }
    Ok(out)
}

fn add_server(endpoint: &str) -> Result<Vec<Dev>, RpcError> {
    // SAFETY: plain registry lookups; null is checked.
    let reg = unsafe { sys::ggml_backend_reg_by_name(c"RPC".as_ptr()) };
    if reg.is_null() {
        return Err(RpcError::NoBackend);
    }
    // SAFETY: as above.
    let f = unsafe {
        sys::ggml_backend_reg_get_proc_address(reg, c"ggml_backend_rpc_add_server".as_ptr())
    };
    if f.is_null() {
        return Err(RpcError::NoBackend);
    }
    // SAFETY: the RPC backend exports this name with this signature
    // (`ggml-rpc.h`: ggml_backend_reg_t ggml_backend_rpc_add_server(const char *)).
    let add: AddServer = unsafe { std::mem::transmute::<*mut std::ffi::c_void, AddServer>(f) };
    let c_endpoint =
        CString::new(endpoint).map_err(|_| RpcError::BadAddress(endpoint.to_string()))?;
    // SAFETY: the worker answered a hello just now, so the connect inside
    // does not abort unless it died in between (then the abort handler
    // reports it).
    let wreg = unsafe { add(c_endpoint.as_ptr()) };
    if wreg.is_null() {
        return Err(RpcError::Add(
            endpoint.to_string(),
            "the worker reports no devices".into(),
        ));
    }
    // SAFETY: `wreg` is the worker's registry, alive for the process.
    let n = unsafe { sys::ggml_backend_reg_dev_count(wreg) };
    let mut devs = Vec::with_capacity(n);
    for i in 0..n {
        // SAFETY: `i` < the registry's device count.
        let dev = unsafe { sys::ggml_backend_reg_dev_get(wreg, i) };
        // SAFETY: a device of a live registry, registered once (see `registered`).
        unsafe { sys::ggml_backend_device_register(dev) };
        devs.push(Dev(dev));
    }
    Ok(devs)
}

/// What runs before the process exits on a llama.cpp abort (the chat's
/// terminal restore); set once.
static CLEANUP: OnceLock<fn()> = OnceLock::new();

/// Registers `f` to run when llama.cpp aborts while RPC workers are in use,
/// before the error line is printed (so it lands on a restored terminal).
pub fn on_abort(f: fn()) {
    let _ = CLEANUP.set(f);
}

unsafe extern "C" fn abort_handler(msg: *const c_char) {
    if let Some(f) = CLEANUP.get() {
        f();
    }
    let text = cstr(msg);
    let line = text.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    // llama.cpp prefixes its source position ("…/ggml-rpc.cpp:566: ").
    let line = line
        .rsplit_once(".cpp:")
        .and_then(|(_, rest)| rest.split_once(": "))
        .map_or(line, |(_, m)| m)
        .trim();
    let workers = registered()
        .try_lock()
        .map(|r| {
            r.iter()
                .map(|(e, _)| e.clone())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let _ = writeln!(
        std::io::stderr(),
        "headroom: error: llama.cpp stopped with RPC workers {workers} in use (one of them may have stopped or become unreachable): {line}"
    );
    // Not `exit`: other threads are inside llama.cpp, whose static
    // destructors must not run under them.
    // SAFETY: ends the process at once; nothing is unwound.
    unsafe { libc::_exit(1) };
}

/// Routes llama.cpp's fatal errors (`GGML_ABORT`) to one line and exit
/// status 1 instead of a core dump; installed once RPC workers are in use,
/// where a lost worker is an expected failure rather than a bug.
pub fn install_abort_handler() {
    static ONCE: OnceLock<()> = OnceLock::new();
    ONCE.get_or_init(|| {
        // SAFETY: sets a process-global function pointer in ggml.
        unsafe { sys::ggml_set_abort_callback(Some(abort_handler)) };
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn endpoints_are_checked_and_deduplicated() {
        assert_eq!(
            parse_endpoints("127.0.0.1:5000, localhost:5001,127.0.0.1:5000", false).unwrap(),
            vec!["127.0.0.1:5000", "localhost:5001"]
        );
        assert!(matches!(
            parse_endpoints("10.0.0.2:5000", false),
            Err(RpcError::Untrusted(_))
        ));
        assert!(parse_endpoints("10.0.0.2:5000", true).is_ok());
        for bad in ["", "host", ":5000", "127.0.0.1:0", "127.0.0.1:http"] {
            assert!(
                matches!(parse_endpoints(bad, false), Err(RpcError::BadAddress(_))),
                "{bad}"
            );
        }
        assert!(parse_endpoints("[::1]:5000", false).is_ok());
    }

    #[test]
    fn a_closed_port_is_unreachable_at_once() {
        let port = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let e = probe(&format!("127.0.0.1:{port}"), PROBE_TIMEOUT).unwrap_err();
        assert!(matches!(e, RpcError::Unreachable { .. }), "{e}");
    }

    #[test]
    fn a_silent_server_is_no_worker_within_the_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let t = std::time::Instant::now();
        let e = probe(&addr.to_string(), Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, RpcError::NoHello { .. }), "{e}");
        assert!(t.elapsed() < Duration::from_secs(2));
        drop(l);
    }

    #[test]
    fn a_worker_of_another_version_is_refused() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut req = [0u8; 1 + 8 + CONN_CAPS];
            s.read_exact(&mut req).unwrap();
            assert_eq!(req[0], CMD_HELLO);
            let mut rsp = (4 + CONN_CAPS as u64).to_le_bytes().to_vec();
            rsp.extend_from_slice(&[6, 1, 0, 0]);
            rsp.extend_from_slice(&[0u8; CONN_CAPS]);
            s.write_all(&rsp).unwrap();
        });
        let e = probe(&addr.to_string(), PROBE_TIMEOUT).unwrap_err();
        h.join().unwrap();
        assert!(matches!(e, RpcError::Version { major: 6, .. }), "{e}");
    }
}
