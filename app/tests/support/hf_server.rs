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
//! Dependency-light on purpose: `std::net` and one thread per connection;
//! every response carries `Connection: close`.

#![allow(dead_code)] // Each test binary uses a different part of it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

use sha2::{Digest, Sha256};

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
        Ok(hex(&hasher.finalize()))
    }

    /// Write `len` bytes from `start`.
    fn write_range(&self, out: &mut impl Write, start: u64, len: u64) -> io::Result<()> {
        match self {
            Body::Bytes(b) => {
                let (s, e) = (to_usize(start), to_usize(start + len));
                out.write_all(&b[s..e])
            }
            Body::File(p) => {
                let mut f = File::open(p)?;
                f.seek(SeekFrom::Start(start))?;
                io::copy(&mut f.take(len), out).map(|_| ())
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
    /// Header names in lower case, in order.
    pub headers: Vec<(String, String)>,
    /// The status the server answered with (`0` when it never answered).
    pub status: u16,
    /// Body bytes written to the client (what a cut or a hang-up left).
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
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
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
            log: Mutex::new(Vec::new()),
            stop: AtomicBool::new(false),
        });
        let accept_state = Arc::clone(&state);
        let accept = std::thread::spawn(move || {
            for stream in listener.incoming() {
                if accept_state.stop.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let conn_state = Arc::clone(&accept_state);
                std::thread::spawn(move || {
                    let _ = serve(&conn_state, stream);
                });
            }
        });
        HfServer {
            state,
            accept: Some(accept),
        }
    }
}

/// A running server; stops when dropped.
pub struct HfServer {
    state: Arc<State>,
    accept: Option<JoinHandle<()>>,
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
        lock(&self.state.log).clone()
    }

    /// Body bytes sent so far for requests whose decoded path contains
    /// `path_contains` (`""`: all).
    pub fn bytes_served(&self, path_contains: &str) -> u64 {
        lock(&self.state.log)
            .iter()
            .filter(|r| percent_decode(&r.target).contains(path_contains))
            .map(|r| r.body_bytes)
            .sum()
    }

    /// Forget the requests so far.
    pub fn clear_requests(&self) {
        lock(&self.state.log).clear();
    }
}

impl Drop for HfServer {
    fn drop(&mut self) {
        self.state.stop.store(true, Ordering::SeqCst);
        // Wake the blocking accept so the thread sees the flag.
        let _ = TcpStream::connect(self.state.addr);
        if let Some(accept) = self.accept.take() {
            let _ = accept.join();
        }
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
    log: Mutex<Vec<Request>>,
    stop: AtomicBool,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A response before it is written.
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
}

fn serve(state: &State, stream: TcpStream) -> io::Result<()> {
    stream.set_read_timeout(Some(Duration::from_secs(30)))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let Some((method, target, headers)) = read_head(&mut reader)? else {
        return Ok(());
    };
    let index = {
        let mut log = lock(&state.log);
        log.push(Request {
            method: method.clone(),
            target: target.clone(),
            headers: headers.clone(),
            status: 0,
            body_bytes: 0,
        });
        log.len() - 1
    };
    if state.hang {
        while !state.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(50));
        }
        return Ok(());
    }
    std::thread::sleep(state.delay);
    let req = Request {
        method,
        target,
        headers,
        status: 0,
        body_bytes: 0,
    };
    let response = route(state, &req);
    if let Some(entry) = lock(&state.log).get_mut(index) {
        entry.status = response.status;
    }
    let mut sent = 0u64;
    let result = write_response(state, stream, &req, response, &mut sent);
    if let Some(entry) = lock(&state.log).get_mut(index) {
        entry.body_bytes = sent;
    }
    result
}

/// Counts the bytes that reach the socket; paces them under a rate limit.
struct Meter<'a, W: Write> {
    inner: W,
    count: &'a mut u64,
    rate: Option<u64>,
    started: std::time::Instant,
}

impl<W: Write> Write for Meter<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let buf = if self.rate.is_some() {
            &buf[..buf.len().min(64 << 10)]
        } else {
            buf
        };
        let n = self.inner.write(buf)?;
        *self.count += n as u64;
        if let Some(rate) = self.rate {
            let due = Duration::from_secs_f64(*self.count as f64 / rate as f64);
            if let Some(wait) = due.checked_sub(self.started.elapsed()) {
                std::thread::sleep(wait);
            }
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// Method, target and headers of a request.
type Head = (String, String, Vec<(String, String)>);

/// Request line and headers; `None` for a connection closed before one.
fn read_head(reader: &mut impl BufRead) -> io::Result<Option<Head>> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (Some(method), Some(target)) = (parts.next(), parts.next()) else {
        return Ok(None);
    };
    let (method, target) = (method.to_string(), target.to_string());
    let mut headers = Vec::new();
    let mut total = 0usize;
    loop {
        line.clear();
        let n = reader.read_line(&mut line)?;
        total += n;
        if n == 0 || total > 64 * 1024 {
            return Ok(None);
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            headers.push((k.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    Ok(Some((method, target, headers)))
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
        let oid = &hex(&Sha256::digest(format!("pointer {}", served.sha256)))[..40];
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
                "_id": hex(&Sha256::digest(&id))[..24],
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

fn write_response(
    state: &State,
    stream: TcpStream,
    req: &Request,
    r: Response,
    sent: &mut u64,
) -> io::Result<()> {
    let length = match &r.body {
        Content::Empty => 0,
        Content::Text(t) => t.len() as u64,
        Content::File { len, .. } => *len,
    };
    let mut head = format!("HTTP/1.1 {} {}\r\n", r.status, reason(r.status));
    for (k, v) in &r.headers {
        let _ = write!(head, "{k}: {v}\r\n");
    }
    let _ = write!(
        head,
        "Content-Length: {length}\r\nConnection: close\r\nX-Request-Id: test-{}\r\n\r\n",
        lock(&state.log).len()
    );
    let mut out = io::BufWriter::with_capacity(1 << 16, &stream);
    out.write_all(head.as_bytes())?;
    out.flush()?;
    let mut out = io::BufWriter::with_capacity(
        1 << 16,
        Meter {
            inner: &stream,
            count: sent,
            rate: state.rate,
            started: std::time::Instant::now(),
        },
    );
    if req.method != "HEAD" {
        match r.body {
            Content::Empty => {}
            Content::Text(t) => out.write_all(t.as_bytes())?,
            Content::File { body, start, len } => {
                let cut = {
                    let mut cut = lock(&state.cut_after);
                    match cut.as_mut() {
                        Some((bytes, times)) if *times > 0 => {
                            *times -= 1;
                            Some(*bytes)
                        }
                        _ => None,
                    }
                };
                body.write_range(&mut out, start, cut.map_or(len, |c| c.min(len)))?;
            }
        }
    }
    out.flush()?;
    drop(out);
    let _ = stream.shutdown(Shutdown::Both);
    Ok(())
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        302 => "Found",
        304 => "Not Modified",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        _ => "Status",
    }
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = bytes
            .get(i + 1..i + 3)
            .filter(|_| bytes[i] == b'%')
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        if let Some(b) = escaped {
            out.push(b);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
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
