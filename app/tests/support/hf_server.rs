//! A Hugging Face Hub stand-in on 127.0.0.1 for tests: model repositories
//! served the way the hub serves them, so the real `hf-hub` client (and
//! anything else that speaks the hub's protocol) can be tested without the
//! network.
//!
//! What it answers, with the hub's headers:
//! - `HEAD`/`GET /{org}/{name}/resolve/{rev}/{path}`: `X-Repo-Commit`, `ETag`,
//!   and for LFS files a `302` to `/cdn/{sha256}` with `X-Linked-Etag` and
//!   `X-Linked-Size` (the hub redirects LFS files to its CDN); `If-None-Match`
//!   gives `304`; missing files give `404` with `X-Error-Code: EntryNotFound`.
//! - `GET /cdn/{sha256}`: the bytes, with single `Range` requests (`206`,
//!   `416`) and `Accept-Ranges: bytes`.
//! - `GET /api/models/{org}/{name}[/revision/{rev}]`: the model info (`sha`,
//!   `siblings`); `GET /api/models/{org}/{name}/tree/{rev}[/{dir}]`: the file
//!   listing, LFS metadata included.
//! - An unknown repository is `401` without a token and `404` with one, as on
//!   the hub (which will not say whether a private repository exists).
//!
//! Knobs for failure tests: [`Builder::require_token`], [`Builder::fail`]
//! (any status for matching paths, optionally only the first n times),
//! [`Builder::cut_after`] (drop the connection mid-body), [`Builder::delay`]
//! (a slow hub), [`Builder::hang`] (accept and never answer), [`Builder::rate_limit`] (a slow
//! transfer, so a test can interrupt it). Every request is logged with its headers, the status it got
//! and the body bytes sent ([`HfServer::requests`], [`HfServer::bytes_served`]).
//!
//! HTTP/1.1 is hyper's (the server half of the crate the client side already
//! uses through reqwest), on a tokio runtime the server owns: dropping the
//! server drops the runtime, which closes the listener and every connection.
//! The hub's routes and the faults are ours. Every response carries
//! `Connection: close`, one request per connection, so the log reads the way
//! the client asked.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::fs::File;
use std::io;
use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::{Duration, Instant};

use http_body_util::{Either, Full};
use hyper::body::{Bytes, Frame, Incoming, SizeHint};
use hyper::header::{CONNECTION, CONTENT_LENGTH};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use percent_encoding::percent_decode_str;
use sha2::{Digest, Sha256};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};

/// The commit every repository of the server is at (40 hex digits).
pub const DEFAULT_COMMIT: &str = "7e57c0de7e57c0de7e57c0de7e57c0de7e57c0de";

/// The content of a served file.
#[derive(Debug, Clone)]
pub enum Body {
    /// Bytes held in memory.
    Bytes(Arc<Vec<u8>>),
    /// A file on disk, read per request (large models stay out of memory).
    File(PathBuf),
}

impl Body {
    fn len(&self) -> io::Result<u64> {
        match self {
            Body::Bytes(b) => Ok(b.len() as u64),
            Body::File(p) => Ok(std::fs::metadata(p)?.len()),
        }
    }

    fn sha256(&self) -> io::Result<String> {
        let mut hasher = Sha256::new();
        match self {
            Body::Bytes(b) => hasher.update(b.as_slice()),
            Body::File(p) => {
                io::copy(&mut File::open(p)?, &mut hasher)?;
            }
        }
        Ok(format!("{:x}", hasher.finalize()))
    }

    /// `n` bytes from `start`.
    fn read_at(&self, start: u64, n: u64) -> io::Result<Bytes> {
        let (s, e) = (to_usize(start), to_usize(start + n));
        match self {
            Body::Bytes(b) => Ok(Bytes::copy_from_slice(&b[s..e])),
            Body::File(p) => {
                let mut buf = vec![0; e - s];
                File::open(p)?.read_exact_at(&mut buf, start)?;
                Ok(Bytes::from(buf))
            }
        }
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// One file of a repository.
#[derive(Debug, Clone)]
pub struct RepoFile {
    /// Path inside the repository (`dir/file.gguf`).
    pub path: String,
    /// Its content.
    pub body: Body,
    /// Stored with Git LFS: served through the CDN redirect, with
    /// `X-Linked-Etag` = its sha256.
    pub lfs: bool,
    /// The sha256 the server announces; `None` computes it from the body. A
    /// test that wants the server to lie (a corrupt download) sets it.
    pub sha256: Option<String>,
}

impl RepoFile {
    /// An LFS file (how the hub stores GGUF files).
    pub fn lfs(path: &str, body: Body) -> Self {
        Self {
            path: path.to_string(),
            body,
            lfs: true,
            sha256: None,
        }
    }

    /// A small file kept in git (`config.json`, `README.md`).
    pub fn git(path: &str, bytes: &[u8]) -> Self {
        Self {
            path: path.to_string(),
            body: Body::Bytes(Arc::new(bytes.to_vec())),
            lfs: false,
            sha256: None,
        }
    }

    /// Announce `sha256` instead of computing it (known, or deliberately wrong).
    #[must_use]
    pub fn with_sha256(mut self, sha256: &str) -> Self {
        self.sha256 = Some(sha256.to_string());
        self
    }
}

/// A file ready to serve, its metadata computed once.
#[derive(Debug, Clone)]
struct Served {
    file: RepoFile,
    len: u64,
    sha256: String,
}

impl Served {
    /// The hub's `ETag`: the sha256 for LFS files, a git-like 40-hex object
    /// id for files in git.
    fn etag(&self) -> String {
        if self.file.lfs {
            self.sha256.clone()
        } else {
            self.sha256[..40].to_string()
        }
    }
}

/// A failure to inject.
#[derive(Debug, Clone)]
struct Fault {
    path_contains: String,
    status: u16,
    remaining: Option<usize>,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Request {
    /// `GET`, `HEAD`, …
    pub method: String,
    /// The request target as sent (percent-encoded, with the query).
    pub target: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    /// The status the server answered with (`0` when it never answered).
    pub status: u16,
    /// Body bytes handed to the connection (what a cut or a hang-up left).
    pub body_bytes: u64,
}

impl Request {
    /// The first header called `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Builds an [`HfServer`].
#[derive(Debug, Default)]
pub struct Builder {
    commit: Option<String>,
    repos: Vec<(String, Vec<RepoFile>)>,
    token: Option<String>,
    faults: Vec<Fault>,
    cut_after: Option<(u64, usize)>,
    hang: bool,
    delay: Duration,
    rate: Option<u64>,
}

impl Builder {
    /// Add a model repository (`org/name`) with its files.
    #[must_use]
    pub fn repo(mut self, id: &str, files: Vec<RepoFile>) -> Self {
        self.repos.push((id.to_string(), files));
        self
    }

    /// The commit the repositories are at (default [`DEFAULT_COMMIT`]).
    #[must_use]
    pub fn commit(mut self, commit: &str) -> Self {
        self.commit = Some(commit.to_string());
        self
    }

    /// Answer `401` unless the request carries `Authorization: Bearer TOKEN`
    /// (a gated or private repository).
    #[must_use]
    pub fn require_token(mut self, token: &str) -> Self {
        self.token = Some(token.to_string());
        self
    }

    /// Answer `status` to every request whose path contains `path_contains`
    /// (`""` matches all), the first `times` times or always (`None`).
    #[must_use]
    pub fn fail(mut self, status: u16, path_contains: &str, times: Option<usize>) -> Self {
        self.faults.push(Fault {
            path_contains: path_contains.to_string(),
            status,
            remaining: times,
        });
        self
    }

    /// Drop the connection after `bytes` bytes of a file's body, for the
    /// first `times` bodies (the headers still announce the full length).
    #[must_use]
    pub fn cut_after(mut self, bytes: u64, times: usize) -> Self {
        self.cut_after = Some((bytes, times));
        self
    }

    /// Accept connections, read the request, never answer.
    #[must_use]
    pub fn hang(mut self) -> Self {
        self.hang = true;
        self
    }

    /// Wait this long before answering each request (a slow hub).
    #[must_use]
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    /// Send file bodies at about `bytes_per_sec` (a slow link).
    #[must_use]
    pub fn rate_limit(mut self, bytes_per_sec: u64) -> Self {
        self.rate = Some(bytes_per_sec.max(1));
        self
    }

    /// Bind a free port on 127.0.0.1 and start serving.
    ///
    /// # Panics
    /// When the port cannot be bound or a file cannot be read (a broken test).
    pub fn start(self) -> HfServer {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("hf-server")
            .enable_io()
            .enable_time()
            .build()
            .expect("tokio runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let repos = self
            .repos
            .into_iter()
            .map(|(id, files)| {
                let files = files
                    .into_iter()
                    .map(|file| {
                        let len = file.body.len().expect("size of a served file");
                        let sha256 = match &file.sha256 {
                            Some(s) => s.clone(),
                            None => file.body.sha256().expect("hash of a served file"),
                        };
                        Served { file, len, sha256 }
                    })
                    .collect();
                (id, files)
            })
            .collect();
        let state = Arc::new(State {
            addr,
            commit: self.commit.unwrap_or_else(|| DEFAULT_COMMIT.to_string()),
            repos,
            token: self.token,
            faults: Mutex::new(self.faults),
            cut_after: Mutex::new(self.cut_after),
            hang: self.hang,
            delay: self.delay,
            rate: self.rate,
            log: Mutex::new(Log::default()),
        });
        runtime.spawn(accept(listener, Arc::clone(&state)));
        HfServer { state, runtime }
    }
}

/// A running server; stops when dropped.
pub struct HfServer {
    state: Arc<State>,
    /// Serves the listener and the connections; dropping it closes them all,
    /// a hung one included, and waits for its threads.
    runtime: tokio::runtime::Runtime,
}

impl HfServer {
    /// Start describing a server.
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// The base URL, for `HF_ENDPOINT`.
    pub fn url(&self) -> String {
        format!("http://{}", self.state.addr)
    }

    /// The commit the repositories are at.
    pub fn commit(&self) -> &str {
        &self.state.commit
    }

    /// Every request so far, in arrival order.
    pub fn requests(&self) -> Vec<Request> {
        lock(&self.state.log).requests.clone()
    }

    /// Body bytes sent so far for requests whose decoded path contains
    /// `path_contains` (`""`: all).
    pub fn bytes_served(&self, path_contains: &str) -> u64 {
        lock(&self.state.log)
            .requests
            .iter()
            .filter(|r| percent_decode(&r.target).contains(path_contains))
            .map(|r| r.body_bytes)
            .sum()
    }

    /// Forget the requests so far.
    pub fn clear_requests(&self) {
        let mut log = lock(&self.state.log);
        log.forgotten += log.requests.len();
        log.requests.clear();
    }
}

struct State {
    addr: SocketAddr,
    commit: String,
    repos: Vec<(String, Vec<Served>)>,
    token: Option<String>,
    faults: Mutex<Vec<Fault>>,
    cut_after: Mutex<Option<(u64, usize)>>,
    hang: bool,
    delay: Duration,
    rate: Option<u64>,
    log: Mutex<Log>,
}

/// The requests since the last [`HfServer::clear_requests`]; a request keeps
/// its number across a clear, so one still being answered updates itself or
/// nothing.
#[derive(Default)]
struct Log {
    forgotten: usize,
    requests: Vec<Request>,
}

impl State {
    /// Log a request; its number.
    fn record(&self, request: Request) -> usize {
        let mut log = lock(&self.log);
        log.requests.push(request);
        log.forgotten + log.requests.len() - 1
    }

    /// Update request number `n`, unless it was cleared since.
    fn update(&self, n: usize, f: impl FnOnce(&mut Request)) {
        let mut log = lock(&self.log);
        let at = n.checked_sub(log.forgotten);
        if let Some(r) = at.and_then(|i| log.requests.get_mut(i)) {
            f(r);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

async fn accept(listener: TcpListener, state: Arc<State>) {
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(serve(Arc::clone(&state), stream));
    }
}

/// One connection, one request: hyper reads it and frames the answer.
async fn serve(state: Arc<State>, stream: TcpStream) {
    let cut = Arc::new(AtomicBool::new(false));
    let io = TokioIo::new(Cuttable {
        stream,
        cut: Arc::clone(&cut),
    });
    let service = service_fn(move |req| answer(Arc::clone(&state), Arc::clone(&cut), req));
    let _ = http1::Builder::new()
        .keep_alive(false)
        .serve_connection(io, service)
        .await;
}

async fn answer(
    state: Arc<State>,
    cut: Arc<AtomicBool>,
    req: hyper::Request<Incoming>,
) -> Result<hyper::Response<Payload>, Infallible> {
    let req = Request {
        method: req.method().to_string(),
        target: req.uri().to_string(),
        headers: req
            .headers()
            .iter()
            .map(|(k, v)| {
                let v = String::from_utf8_lossy(v.as_bytes()).into_owned();
                (k.as_str().to_string(), v)
            })
            .collect(),
        status: 0,
        body_bytes: 0,
    };
    let n = state.record(req.clone());
    if state.hang {
        // Until the server is dropped, which drops this future.
        std::future::pending::<()>().await;
    }
    if !state.delay.is_zero() {
        tokio::time::sleep(state.delay).await;
    }
    let response = route(&state, &req);
    state.update(n, |r| r.status = response.status);
    Ok(response.into_http(&state, n, req.method == Method::HEAD.as_str(), cut))
}

/// The connection's socket, which a body cut short closes. hyper would drop
/// what it still buffers of a body that fails or ends early, so the cut waits
/// for hyper's next flush of the socket, which comes only once every byte it
/// was handed is written: that flush fails, and hyper drops the connection.
struct Cuttable {
    stream: TcpStream,
    cut: Arc<AtomicBool>,
}

impl AsyncRead for Cuttable {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Cuttable {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if self.cut.load(Ordering::SeqCst) {
            let cut = io::Error::new(io::ErrorKind::ConnectionAborted, "cut short on purpose");
            return Poll::Ready(Err(cut));
        }
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// A response before hyper gets it.
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Content,
}

enum Content {
    Empty,
    Text(String),
    /// A byte range of a served file.
    File {
        body: Body,
        start: u64,
        len: u64,
    },
}

impl Response {
    fn new(status: u16) -> Self {
        Self {
            status,
            headers: Vec::new(),
            body: Content::Empty,
        }
    }

    fn header(mut self, name: &str, value: impl Into<String>) -> Self {
        self.headers.push((name.to_string(), value.into()));
        self
    }

    fn json(self, value: &serde_json::Value) -> Self {
        let mut r = self.header("Content-Type", "application/json; charset=utf-8");
        r.body = Content::Text(value.to_string());
        r
    }

    /// The hub's error shape: `X-Error-Code`, `X-Error-Message` and
    /// `{"error": …}`.
    fn error(status: u16, code: Option<&str>, message: &str) -> Self {
        let mut r = Self::new(status).header("X-Error-Message", message);
        if let Some(code) = code {
            r = r.header("X-Error-Code", code);
        }
        r.json(&serde_json::json!({ "error": message }))
    }

    /// For hyper, which sets `Content-Length` from the body (and keeps ours
    /// on a `HEAD`, whose body it never sends).
    fn into_http(
        self,
        state: &Arc<State>,
        n: usize,
        head: bool,
        cut: Arc<AtomicBool>,
    ) -> hyper::Response<Payload> {
        let status = StatusCode::from_u16(self.status).expect("a valid status");
        let mut response = hyper::Response::builder()
            .status(status)
            .header(CONNECTION, "close")
            .header("X-Request-Id", format!("test-{}", n + 1));
        for (k, v) in &self.headers {
            response = response.header(k, v);
        }
        let payload = match self.body {
            _ if head => {
                let length = match &self.body {
                    Content::Empty => 0,
                    Content::Text(t) => t.len() as u64,
                    Content::File { len, .. } => *len,
                };
                response = response.header(CONTENT_LENGTH, length);
                Either::Left(Full::default())
            }
            Content::Empty => Either::Left(Full::default()),
            Content::Text(t) => Either::Left(Full::new(Bytes::from(t))),
            Content::File { body, start, len } => {
                let cut_at = {
                    let mut cut = lock(&state.cut_after);
                    match cut.as_mut() {
                        Some((bytes, times)) if *times > 0 => {
                            *times -= 1;
                            Some(*bytes)
                        }
                        _ => None,
                    }
                };
                let send = cut_at.map_or(len, |c| c.min(len));
                Either::Right(FileBody {
                    source: body,
                    next: start,
                    end: start + send,
                    len,
                    sent: 0,
                    cut: (send < len).then_some(cut),
                    rate: state.rate,
                    started: Instant::now(),
                    pause: None,
                    state: Arc::clone(state),
                    n,
                })
            }
        };
        response.body(payload).expect("a valid response")
    }
}

/// A response body for hyper: the text, or a served file.
type Payload = Either<Full<Bytes>, FileBody>;

/// A byte range of a served file, read a chunk at a time: paced under a
/// rate limit, counted into the log, maybe cut short.
struct FileBody {
    source: Body,
    /// The offset of the next byte, and where sending stops.
    next: u64,
    end: u64,
    /// What `Content-Length` announced (past `end` when cut).
    len: u64,
    sent: u64,
    /// The connection's mark, when this body is cut short.
    cut: Option<Arc<AtomicBool>>,
    rate: Option<u64>,
    started: Instant,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    state: Arc<State>,
    /// The request's number in the log.
    n: usize,
}

impl hyper::body::Body for FileBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let this = self.get_mut();
        if let Some(pause) = this.pause.as_mut() {
            ready!(pause.as_mut().poll(cx));
            this.pause = None;
        }
        if this.next == this.end {
            return match &this.cut {
                // Never ends: the connection does, at its next flush.
                Some(cut) => {
                    cut.store(true, Ordering::SeqCst);
                    Poll::Pending
                }
                None => Poll::Ready(None),
            };
        }
        let n = (this.end - this.next).min(64 << 10);
        let chunk = match this.source.read_at(this.next, n) {
            Ok(chunk) => chunk,
            Err(e) => return Poll::Ready(Some(Err(e))),
        };
        this.next += n;
        this.sent += n;
        let sent = this.sent;
        this.state.update(this.n, |r| r.body_bytes = sent);
        if let Some(rate) = this.rate {
            let due = Duration::from_secs_f64(sent as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(this.started.elapsed()) {
                this.pause = Some(Box::pin(tokio::time::sleep(wait)));
            }
        }
        Poll::Ready(Some(Ok(Frame::data(chunk))))
    }

    fn is_end_stream(&self) -> bool {
        self.cut.is_none() && self.next == self.end
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.len)
    }
}

fn route(state: &State, req: &Request) -> Response {
    let (path, query) = req.target.split_once('?').unwrap_or((&req.target, ""));
    let path = percent_decode(path);

    let fault = {
        let mut faults = lock(&state.faults);
        faults
            .iter_mut()
            .find(|f| path.contains(&f.path_contains) && f.remaining != Some(0))
            .map(|f| {
                if let Some(n) = f.remaining.as_mut() {
                    *n -= 1;
                }
                f.status
            })
    };
    if let Some(status) = fault {
        let code = match status {
            401 => Some("Unauthorized"),
            403 => Some("GatedRepo"),
            404 => Some("EntryNotFound"),
            _ => None,
        };
        return Response::error(status, code, &format!("injected failure {status}"))
            .header("X-Repo-Commit", &state.commit);
    }

    let bearer = req
        .header("authorization")
        .and_then(|v| v.strip_prefix("Bearer "));
    // CDN URLs are signed on the hub: no token there.
    if let Some(token) = &state.token
        && !path.starts_with("/cdn/")
        && bearer != Some(token.as_str())
    {
        let message = if bearer.is_some() {
            "Invalid credentials in Authorization header"
        } else {
            "Access to this model is restricted. You must be authenticated to access it."
        };
        return Response::error(401, Some("GatedRepo"), message);
    }

    let segments: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match segments.as_slice() {
        ["cdn", sha] => cdn(state, req, sha),
        ["api", "models", org, name, rest @ ..] => {
            api(state, bearer.is_some(), org, name, rest, query)
        }
        [org, name, "resolve", rev, file @ ..] if !file.is_empty() => resolve(
            state,
            req,
            bearer.is_some(),
            org,
            name,
            rev,
            &file.join("/"),
        ),
        _ => Response::error(404, None, "Not Found"),
    }
}

fn find_repo<'a>(state: &'a State, org: &str, name: &str) -> Option<&'a [Served]> {
    let id = format!("{org}/{name}");
    state
        .repos
        .iter()
        .find(|(r, _)| *r == id)
        .map(|(_, files)| files.as_slice())
}

fn repo_missing(authenticated: bool) -> Response {
    if authenticated {
        Response::error(404, Some("RepoNotFound"), "Repository not found")
    } else {
        Response::error(
            401,
            Some("RepoNotFound"),
            "Repository not found (it may be private: authenticate to see it)",
        )
    }
}

fn resolve(
    state: &State,
    req: &Request,
    authenticated: bool,
    org: &str,
    name: &str,
    rev: &str,
    file: &str,
) -> Response {
    let Some(files) = find_repo(state, org, name) else {
        return repo_missing(authenticated);
    };
    if rev != "main" && rev != state.commit {
        return Response::error(404, Some("RevisionNotFound"), "Invalid rev id");
    }
    let Some(served) = files.iter().find(|f| f.file.path == file) else {
        return Response::error(404, Some("EntryNotFound"), "Entry not found")
            .header("X-Repo-Commit", &state.commit);
    };
    let etag = served.etag();
    let quoted = format!("\"{etag}\"");
    if let Some(inm) = req.header("if-none-match")
        && inm
            .split(',')
            .any(|t| t.trim().trim_start_matches("W/") == quoted)
    {
        return Response::new(304)
            .header("ETag", &quoted)
            .header("X-Repo-Commit", &state.commit);
    }
    if served.file.lfs {
        // The hub answers LFS files with a redirect to its CDN; the metadata
        // a client caches by travels on the redirect itself.
        let oid = &format!("{:x}", Sha256::digest(format!("pointer {}", served.sha256)))[..40];
        Response::new(302)
            .header(
                "Location",
                format!("http://{}/cdn/{}", state.addr, served.sha256),
            )
            .header("X-Repo-Commit", &state.commit)
            .header("X-Linked-Etag", &quoted)
            .header("X-Linked-Size", served.len.to_string())
            .header("ETag", format!("\"{oid}\""))
            .header("Accept-Ranges", "bytes")
    } else {
        content(req, served, &quoted).header("X-Repo-Commit", &state.commit)
    }
}

fn cdn(state: &State, req: &Request, sha: &str) -> Response {
    let served = state
        .repos
        .iter()
        .flat_map(|(_, files)| files)
        .find(|f| f.file.lfs && f.sha256 == sha);
    match served {
        Some(served) => content(req, served, &format!("\"{}\"", served.sha256)),
        None => Response::error(404, None, "NoSuchKey"),
    }
}

/// The file's bytes, or the range asked for.
fn content(req: &Request, served: &Served, etag: &str) -> Response {
    let len = served.len;
    let base = |status| {
        Response::new(status)
            .header("ETag", etag)
            .header("Accept-Ranges", "bytes")
            .header("Content-Type", "application/octet-stream")
    };
    let (status, start, count) = match req.header("range").map(|r| parse_range(r, len)) {
        None | Some(RangeAsk::Ignore) => (200, 0, len),
        Some(RangeAsk::Unsatisfiable) => {
            return base(416).header("Content-Range", format!("bytes */{len}"));
        }
        Some(RangeAsk::Bytes(s, e)) => (206, s, e - s + 1),
    };
    let mut r = base(status);
    if status == 206 {
        r = r.header(
            "Content-Range",
            format!("bytes {start}-{}/{len}", start + count - 1),
        );
    }
    r.body = Content::File {
        body: served.file.body.clone(),
        start,
        len: count,
    };
    r
}

/// What a `Range` header asks of a file of `len` bytes.
#[derive(Debug, PartialEq, Eq)]
enum RangeAsk {
    /// Inclusive first and last byte.
    Bytes(u64, u64),
    /// Nothing in the file: `416`.
    Unsatisfiable,
    /// Not a single byte range (several, or not bytes): serve it all.
    Ignore,
}

fn parse_range(header: &str, len: u64) -> RangeAsk {
    let Some(spec) = header.trim().strip_prefix("bytes=") else {
        return RangeAsk::Ignore;
    };
    if spec.contains(',') {
        return RangeAsk::Ignore;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAsk::Ignore;
    };
    let (a, b) = (a.trim(), b.trim());
    let range = match (a.parse::<u64>().ok(), b.parse::<u64>().ok()) {
        (Some(s), None) if b.is_empty() => Some((s, len.saturating_sub(1))),
        (Some(s), Some(e)) if s <= e => Some((s, e.min(len.saturating_sub(1)))),
        (None, Some(n)) if a.is_empty() => {
            if n == 0 {
                return RangeAsk::Unsatisfiable;
            }
            Some((len.saturating_sub(n), len.saturating_sub(1)))
        }
        _ => return RangeAsk::Ignore,
    };
    match range {
        Some((s, e)) if s < len && s <= e => RangeAsk::Bytes(s, e),
        _ => RangeAsk::Unsatisfiable,
    }
}

fn api(
    state: &State,
    authenticated: bool,
    org: &str,
    name: &str,
    rest: &[&str],
    query: &str,
) -> Response {
    let Some(files) = find_repo(state, org, name) else {
        return repo_missing(authenticated);
    };
    let id = format!("{org}/{name}");
    let rev_ok = |rev: &str| rev == "main" || rev == state.commit;
    match rest {
        [] | ["revision", _] => {
            if let ["revision", rev] = rest
                && !rev_ok(rev)
            {
                return Response::error(404, Some("RevisionNotFound"), "Invalid rev id");
            }
            let siblings: Vec<_> = files
                .iter()
                .map(|f| serde_json::json!({ "rfilename": f.file.path }))
                .collect();
            Response::new(200).json(&serde_json::json!({
                "_id": format!("{:x}", Sha256::digest(&id))[..24],
                "id": id,
                "modelId": id,
                "author": org,
                "sha": state.commit,
                "private": false,
                "gated": false,
                "disabled": false,
                "downloads": 0,
                "likes": 0,
                "tags": ["gguf"],
                "library_name": "gguf",
                "siblings": siblings,
            }))
        }
        ["tree", rev, dir @ ..] => {
            if !rev_ok(rev) {
                return Response::error(404, Some("RevisionNotFound"), "Invalid rev id");
            }
            let recursive = query
                .split('&')
                .any(|kv| kv == "recursive=true" || kv == "recursive=1");
            Response::new(200).json(&tree(files, &dir.join("/"), recursive))
        }
        _ => Response::error(404, None, "Not Found"),
    }
}

/// The hub's tree listing: files (with `lfs` metadata for LFS files) and,
/// when not recursive, the directories directly under `dir`.
fn tree(files: &[Served], dir: &str, recursive: bool) -> serde_json::Value {
    let prefix = if dir.is_empty() {
        String::new()
    } else {
        format!("{}/", dir.trim_end_matches('/'))
    };
    let mut dirs = BTreeSet::new();
    let mut out = Vec::new();
    for f in files {
        let Some(rel) = f.file.path.strip_prefix(&prefix) else {
            continue;
        };
        if !recursive && let Some((sub, _)) = rel.split_once('/') {
            dirs.insert(format!("{prefix}{sub}"));
            continue;
        }
        let mut entry = serde_json::json!({
            "type": "file",
            "oid": f.etag(),
            "size": f.len,
            "path": f.file.path,
        });
        if f.file.lfs {
            entry["lfs"] = serde_json::json!({
                "oid": f.sha256,
                "size": f.len,
                "pointerSize": 134,
            });
        }
        out.push(entry);
    }
    let mut listing: Vec<_> = dirs
        .into_iter()
        .map(|d| serde_json::json!({ "type": "directory", "oid": "0".repeat(40), "path": d }))
        .collect();
    listing.extend(out);
    serde_json::Value::Array(listing)
}

fn percent_decode(s: &str) -> String {
    percent_decode_str(s).decode_utf8_lossy().into_owned()
}

#[cfg(test)]
mod tests {
    use super::{RangeAsk, parse_range, percent_decode};

    #[test]
    fn ranges() {
        assert_eq!(parse_range("bytes=0-9", 100), RangeAsk::Bytes(0, 9));
        assert_eq!(parse_range("bytes=90-", 100), RangeAsk::Bytes(90, 99));
        assert_eq!(parse_range("bytes=-10", 100), RangeAsk::Bytes(90, 99));
        assert_eq!(parse_range("bytes=95-200", 100), RangeAsk::Bytes(95, 99));
        assert_eq!(parse_range("bytes=100-", 100), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range("bytes=-0", 100), RangeAsk::Unsatisfiable);
        assert_eq!(parse_range("bytes=0-1,5-6", 100), RangeAsk::Ignore);
        assert_eq!(parse_range("items=0-1", 100), RangeAsk::Ignore);
        assert_eq!(parse_range("bytes=9-1", 100), RangeAsk::Ignore);
    }

    #[test]
    fn decoding() {
        assert_eq!(percent_decode("a%20b%2Fc"), "a b/c");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%zz"), "%zz");
    }
}
