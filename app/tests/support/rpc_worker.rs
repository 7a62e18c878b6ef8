//! An RPC worker for the tests: `ggml-rpc-server`, built from the same
//! llama.cpp by `scripts/llama-tools.sh`, on 127.0.0.1 at a free port
//! (shared by the run and chat test binaries).

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use headroom::llama::rpc;

/// The worker binary, built (or found built) once per test process.
pub fn worker_bin() -> &'static PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let tools =
            crate::bench_common::llama_tools().expect("scripts/llama-tools.sh builds the tools");
        tools
            .into_iter()
            .find(|p| p.ends_with("ggml-rpc-server"))
            .expect("llama-tools.sh prints ggml-rpc-server's path")
    })
}

/// A worker on 127.0.0.1 at a free port, stopped on drop.
pub struct Worker {
    child: Child,
    pub endpoint: String,
}

impl Worker {
    /// Starts a worker (1 thread), optionally under `prlimit --as=BYTES`,
    /// and waits until it answers the RPC hello.
    pub fn start(as_limit: Option<u64>) -> Worker {
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let mut cmd = match as_limit {
                Some(limit) => {
                    let mut c = Command::new("prlimit");
                    c.arg(format!("--as={limit}")).arg(worker_bin());
                    c
                }
                None => Command::new(worker_bin()),
            };
            // Workers compute on the CPU: a worker built with Vulkan would
            // serve lavapipe if the variable that names it reached it.
            let child = cmd
                .env_remove("GGML_VK_VISIBLE_DEVICES")
                .args(["-H", "127.0.0.1", "-p", &port.to_string(), "-t", "1"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starts ggml-rpc-server (prlimit is installed by setup.sh)");
            let mut w = Worker {
                child,
                endpoint: format!("127.0.0.1:{port}"),
            };
            let t = Instant::now();
            while t.elapsed() < Duration::from_secs(10) {
                if rpc::probe(&w.endpoint, Duration::from_millis(500)).is_ok() {
                    return w;
                }
                if w.child.try_wait().ok().flatten().is_some() {
                    break; // the port was taken meanwhile: another one
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = w.child.kill();
        }
        panic!("no ggml-rpc-server answered on 127.0.0.1");
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The worker's peak resident set so far (`VmHWM`), bytes.
    pub fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("the worker's /proc status");
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .expect("VmHWM")
            * 1024
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.kill();
    }
}
