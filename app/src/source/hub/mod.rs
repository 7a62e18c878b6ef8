//! Hugging Face Hub glue around `hf-hub`: where the hub is, where its cache
//! lives, which token to send and whether to go online at all — resolved here
//! from the environment and handed to the client explicitly — plus a download
//! into the shared cache that gives up fast when the hub cannot be reached.
//!
//! The environment is resolved in our code, not left to `hf-hub`, because
//! `hf-hub` 1.0 ignores `HF_HUB_OFFLINE` and its next version drops
//! environment handling altogether. The names and precedence follow the Python
//! client (`huggingface_hub.constants`), so the cache
//! (`models--org--name/{blobs,refs,snapshots}`) is the one llama.cpp and the
//! Python tools already share.

pub mod cache;
pub mod choose;
pub mod client;
pub mod header;
pub mod local;
pub mod progress;
pub mod pull;
pub mod refresh;
pub mod transfer;
pub mod verified;

pub use client::{Body, FileMeta, Hub, RemoteFile, Timeouts, is_path_inside_repo, is_sha256};

use std::collections::HashSet;
use std::ffi::OsString;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use hf_hub::progress::{DownloadEvent, FileProgress, ProgressEvent, ProgressHandler};
use hf_hub::{HFClient, HFClientSync, HFError};

/// The public hub, when `HF_ENDPOINT` is not set.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Where the hub is, where its files are cached, and how to talk to it.
#[derive(Debug, Clone)]
pub struct HubEnv {
    /// Base URL of the hub, without a trailing slash (`HF_ENDPOINT`).
    pub endpoint: String,
    /// The hub cache: `HF_HUB_CACHE`, else `$HF_HOME/hub`, else
    /// `$XDG_CACHE_HOME/huggingface/hub`, else `~/.cache/huggingface/hub`.
    pub cache_dir: PathBuf,
    /// The token to send, if any.
    pub token: Option<Token>,
    /// `HF_HUB_OFFLINE` (or `TRANSFORMERS_OFFLINE`) is set: never go online.
    pub offline: bool,
}

/// A hub access token. Its `Debug` and `Display` show where it came from,
/// never its value, so it cannot leak through an error message or a log.
#[derive(Clone)]
pub struct Token {
    value: String,
    source: String,
}

impl Token {
    /// Where the token was found: `$HF_TOKEN` or a file path.
    #[must_use]
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The token itself, for an `Authorization` header (never for printing).
    pub(crate) fn secret(&self) -> &str {
        &self.value
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Token(from {})", self.source)
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the token from {}", self.source)
    }
}

impl HubEnv {
    /// Resolve the hub settings from this process's environment.
    ///
    /// # Errors
    /// When neither a cache variable nor a home directory says where the hub
    /// cache is.
    pub fn from_env() -> Result<Self> {
        let home = directories::BaseDirs::new().map(|d| d.home_dir().to_path_buf());
        Self::resolve(|name| std::env::var_os(name), home.as_deref())
    }

    /// Resolve the hub settings from `var` (an environment lookup) and the
    /// home directory. Empty variables count as unset, as in the Python client.
    ///
    /// # Errors
    /// When neither a cache variable nor `home` says where the hub cache is.
    pub fn resolve(var: impl Fn(&str) -> Option<OsString>, home: Option<&Path>) -> Result<Self> {
        let var = |name: &str| var(name).filter(|v| !v.is_empty());
        let text = |name: &str| var(name).map(|v| v.to_string_lossy().trim().to_string());
        let flag = |name: &str| text(name).is_some_and(|v| is_truthy(&v));

        let endpoint = text("HF_ENDPOINT")
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string())
            .trim_end_matches('/')
            .to_string();
        let hf_home = match var("HF_HOME") {
            Some(dir) => Some(PathBuf::from(dir)),
            None => var("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| home.map(|h| h.join(".cache")))
                .map(|cache| cache.join("huggingface")),
        };
        let cache_dir = var("HF_HUB_CACHE")
            .or_else(|| var("HUGGINGFACE_HUB_CACHE"))
            .map(PathBuf::from)
            .or_else(|| hf_home.as_ref().map(|h| h.join("hub")))
            .context(
                "no home directory to find the Hugging Face cache in (set HF_HOME or HF_HUB_CACHE)",
            )?;

        let token = if flag("HF_HUB_DISABLE_IMPLICIT_TOKEN") {
            None
        } else {
            let from_var = ["HF_TOKEN", "HUGGING_FACE_HUB_TOKEN"]
                .into_iter()
                .find_map(|name| {
                    text(name).filter(|t| !t.is_empty()).map(|value| Token {
                        value,
                        source: format!("${name}"),
                    })
                });
            let token_file = var("HF_TOKEN_PATH")
                .map(PathBuf::from)
                .or_else(|| hf_home.as_ref().map(|h| h.join("token")));
            from_var.or_else(|| token_file.and_then(|path| read_token_file(&path)))
        };

        Ok(Self {
            endpoint,
            cache_dir,
            token,
            offline: flag("HF_HUB_OFFLINE") || flag("TRANSFORMERS_OFFLINE"),
        })
    }

    /// The `hf-hub` client for these settings: nothing is left for it to
    /// read from the environment except the token when we have none (it finds
    /// none either: it follows the same precedence).
    fn client(&self) -> Result<HFClientSync> {
        self.builder()
            .build_sync()
            .context("setting up the Hugging Face client")
    }

    /// The `hf-hub` client builder for these settings (see [`Self::client`]).
    pub(crate) fn builder(&self) -> hf_hub::HFClientBuilder {
        let mut builder = HFClient::builder()
            .endpoint(self.endpoint.clone())
            .cache_dir(self.cache_dir.clone())
            .user_agent(format!("headroom/{}", env!("CARGO_PKG_VERSION")))
            // One retry: an unreachable hub must fail over in seconds, and a
            // failed download falls back to another source anyway.
            .retry_max_attempts(1);
        if let Some(token) = &self.token {
            builder = builder.token(token.value.clone());
        }
        builder
    }
}

/// The Python client's notion of a true flag: `1`, `ON`, `YES` or `TRUE`.
#[must_use]
pub fn is_truthy(value: &str) -> bool {
    ["1", "ON", "YES", "TRUE"]
        .iter()
        .any(|t| value.trim().eq_ignore_ascii_case(t))
}

fn read_token_file(path: &Path) -> Option<Token> {
    let value = std::fs::read_to_string(path).ok()?.trim().to_string();
    (!value.is_empty()).then(|| Token {
        value,
        source: path.display().to_string(),
    })
}

/// The cache folder of a model repository: `models--org--name`.
#[must_use]
pub fn repo_folder(repo_id: &str) -> String {
    std::iter::once("models")
        .chain(repo_id.split('/'))
        .collect::<Vec<_>>()
        .join("--")
}

/// A file already in the hub cache at `revision` (a branch such as `main`, or
/// a commit), found without any network access: `refs/<revision>` names the
/// commit, `snapshots/<commit>/<file>` points at the blob.
#[must_use]
pub fn cached_file(env: &HubEnv, repo_id: &str, revision: &str, file: &str) -> Option<PathBuf> {
    let repo = env.cache_dir.join(repo_folder(repo_id));
    let commit = if revision.len() == 40 && revision.bytes().all(|b| b.is_ascii_hexdigit()) {
        revision.to_string()
    } else {
        std::fs::read_to_string(repo.join("refs").join(revision))
            .ok()?
            .trim()
            .to_string()
    };
    if commit.is_empty() || commit.contains(['/', '\\']) || commit.starts_with('.') {
        return None;
    }
    let path = repo.join("snapshots").join(commit).join(file);
    path.is_file().then_some(path)
}

/// A file the hub download left in the cache.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The snapshot path (`snapshots/<commit>/<file>`, a link to the blob).
    pub path: PathBuf,
    /// The blob the snapshot path resolves to.
    pub blob: PathBuf,
    /// Whether this download wrote the blob (it was not in the cache before).
    pub fresh: bool,
}

impl Fetched {
    /// Remove what this download added: the blob and the snapshot link to it,
    /// but only when the blob is new. A blob that was already in the cache
    /// belongs to the user (or another tool) and is left alone.
    ///
    /// # Errors
    /// When the files cannot be removed.
    pub fn discard(&self) -> Result<()> {
        if !self.fresh {
            return Ok(());
        }
        let is_link_to_blob = std::fs::symlink_metadata(&self.path)
            .is_ok_and(|m| m.file_type().is_symlink())
            && std::fs::canonicalize(&self.path).is_ok_and(|target| target == self.blob);
        if is_link_to_blob || self.path == self.blob {
            std::fs::remove_file(&self.path)
                .with_context(|| format!("removing {}", self.path.display()))?;
        }
        match std::fs::remove_file(&self.blob) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(e).with_context(|| format!("removing {}", self.blob.display()))
            }
            _ => Ok(()),
        }
    }
}

/// Why a hub download did not produce a file. The messages are written for
/// the user and never contain the token.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    /// `HF_HUB_OFFLINE` is set.
    #[error("skipped (HF_HUB_OFFLINE is set)")]
    Offline,
    /// No connection to the hub (DNS, refused, timed out before an answer).
    #[error("{endpoint} is unreachable ({reason})")]
    Unreachable {
        /// The hub's base URL.
        endpoint: String,
        /// The innermost cause, or the time waited.
        reason: String,
    },
    /// The download started but stopped delivering bytes.
    #[error("the download from {endpoint} stalled for {secs} s")]
    Stalled {
        /// The hub's base URL.
        endpoint: String,
        /// Seconds without progress.
        secs: u64,
    },
    /// 401: a token is needed, or the one sent was refused.
    #[error("{}", auth_message(.repo_id, .token.as_ref()))]
    AuthRequired {
        /// The repository asked for.
        repo_id: String,
        /// The token that was sent, if any (only its source is shown).
        token: Option<Token>,
    },
    /// 403: the token is valid but may not read this repository.
    #[error(
        "access to {repo_id} was denied (403): accept its terms on the Hugging Face page or set HF_TOKEN to a token that may read it"
    )]
    Forbidden {
        /// The repository asked for.
        repo_id: String,
    },
    /// 404: no such repository or file.
    #[error("{file} was not found in {repo_id} (404)")]
    NotFound {
        /// The repository asked for.
        repo_id: String,
        /// The file asked for.
        file: String,
    },
    /// Anything else the client reported.
    #[error("{0}")]
    Other(String),
}

fn auth_message(repo_id: &str, token: Option<&Token>) -> String {
    match token {
        None => format!(
            "{repo_id} needs a token (401): set HF_TOKEN to a Hugging Face token that may read it"
        ),
        Some(t) => format!(
            "{t} was refused for {repo_id} (401): set HF_TOKEN to a valid Hugging Face token that may read it"
        ),
    }
}

/// How long a download may wait before it gives up.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// From the start until the hub has answered the metadata request.
    pub connect: Duration,
    /// Between two pieces of progress once the transfer has started.
    pub stall: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(8),
            stall: Duration::from_secs(60),
        }
    }
}

/// Download `file` of `repo_id` at `main` into the hub cache (or find it
/// there, when the hub says the cached copy is current), with a progress
/// line on stderr when stderr is a terminal. `on_start` is called once with
/// the file's size when the hub has answered, before the transfer.
///
/// `hf-hub` lets us configure neither the connect timeout of its requests
/// nor cancel a blocking call, so the call runs on its own thread and this
/// one stops waiting after `limits.connect` without an answer from the hub,
/// or `limits.stall` without progress. An abandoned call can only finish
/// into the cache, where the next start verifies it like any other copy.
///
/// # Errors
/// A [`FetchError`] saying why, in words for the user.
pub fn download(
    env: &HubEnv,
    repo_id: &str,
    file: &str,
    limits: Limits,
    on_start: impl FnOnce(u64),
) -> Result<Fetched, FetchError> {
    if env.offline {
        return Err(FetchError::Offline);
    }
    let Some((owner, name)) = repo_id.split_once('/') else {
        return Err(FetchError::Other(format!(
            "{repo_id:?} is not an org/name repository"
        )));
    };
    let blobs = env.cache_dir.join(repo_folder(repo_id)).join("blobs");
    let blobs_before = blob_names(&blobs);
    let client = env
        .client()
        .map_err(|e| FetchError::Other(format!("{e:#}")))?;
    let watch = Arc::new(Watch::default());
    let (tx, rx) = mpsc::channel();
    {
        let repo = client.model(owner, name);
        let (file, watch) = (file.to_string(), Arc::clone(&watch));
        let spawned = std::thread::Builder::new()
            .name("hub-download".into())
            .spawn(move || {
                let result = repo
                    .download_file()
                    .filename(file)
                    .progress(hf_hub::progress::Progress::from(watch))
                    .send();
                let _ = tx.send(result);
            });
        if let Err(e) = spawned {
            return Err(FetchError::Other(format!(
                "cannot start the download thread: {e}"
            )));
        }
    }

    // Made when the hub has answered with the size; an early return drops
    // it, which leaves its last state on screen as `finish` does.
    let mut bar: Option<progress::Progress> = None;
    let mut show = |bytes: u64, total: u64| {
        bar.get_or_insert_with(|| progress::Progress::download(file, total, 0))
            .update(bytes);
    };
    let mut on_start = Some(on_start);
    let mut announce = |state: &WatchState| {
        if let Some(total) = state.started
            && let Some(f) = on_start.take()
        {
            f(total);
        }
    };
    let began = Instant::now();
    let result = loop {
        let received = rx.recv_timeout(Duration::from_millis(200));
        let state = watch.snapshot();
        announce(&state);
        match received {
            Ok(result) => {
                if let (Ok(_), Some(total)) = (&result, state.started) {
                    show(state.bytes, total);
                }
                break result;
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(FetchError::Other("the download thread died".into()));
            }
            Err(RecvTimeoutError::Timeout) => {}
        }
        match state.started {
            None if began.elapsed() > limits.connect => {
                return Err(FetchError::Unreachable {
                    endpoint: env.endpoint.clone(),
                    reason: format!("no answer within {} s", limits.connect.as_secs()),
                });
            }
            Some(_) if state.last_event.elapsed() > limits.stall => {
                return Err(FetchError::Stalled {
                    endpoint: env.endpoint.clone(),
                    secs: limits.stall.as_secs(),
                });
            }
            Some(total) => show(state.bytes, total),
            None => {}
        }
    };
    if let Some(bar) = bar {
        bar.finish();
    }

    let path = result.map_err(|e| classify(e, env, repo_id, file))?;
    let blob = std::fs::canonicalize(&path).unwrap_or_else(|_| path.clone());
    let fresh = blob
        .file_name()
        .is_some_and(|n| !blobs_before.contains(&n.to_os_string()));
    Ok(Fetched { path, blob, fresh })
}

fn blob_names(dir: &Path) -> HashSet<OsString> {
    std::fs::read_dir(dir)
        .map(|entries| entries.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// The user's reason for an `hf-hub` error (token, access, missing file,
/// unreachable hub).
pub(crate) fn classify(err: HFError, env: &HubEnv, repo_id: &str, file: &str) -> FetchError {
    match err {
        HFError::AuthRequired { .. } => FetchError::AuthRequired {
            repo_id: repo_id.to_string(),
            token: env.token.clone(),
        },
        HFError::Forbidden { .. } => FetchError::Forbidden {
            repo_id: repo_id.to_string(),
        },
        HFError::RepoNotFound { .. } | HFError::EntryNotFound { .. } => FetchError::NotFound {
            repo_id: repo_id.to_string(),
            file: file.to_string(),
        },
        HFError::Request { ref source, .. } if source.is_connect() || source.is_timeout() => {
            FetchError::Unreachable {
                endpoint: env.endpoint.clone(),
                reason: root_cause(&err),
            }
        }
        other => FetchError::Other(other.to_string()),
    }
}

/// The innermost error of a chain: for a failed connection, the DNS or
/// socket error the user can act on, not reqwest's wrapping.
fn root_cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut cur = err;
    while let Some(next) = cur.source() {
        cur = next;
    }
    cur.to_string()
}

/// What the progress callbacks have seen so far.
#[derive(Debug, Clone, Copy)]
struct WatchState {
    /// Total bytes, once the hub answered (`Start`).
    started: Option<u64>,
    bytes: u64,
    last_event: Instant,
}

/// Progress handler: records, never blocks and never prints (the waiting
/// thread draws the line, so a slow terminal cannot slow the transfer).
struct Watch(Mutex<WatchState>);

impl Default for Watch {
    fn default() -> Self {
        Self(Mutex::new(WatchState {
            started: None,
            bytes: 0,
            last_event: Instant::now(),
        }))
    }
}

impl Watch {
    fn snapshot(&self) -> WatchState {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ProgressHandler for Watch {
    fn on_progress(&self, event: &ProgressEvent) {
        let ProgressEvent::Download(event) = event else {
            return;
        };
        let mut s = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        s.last_event = Instant::now();
        match event {
            DownloadEvent::Start { total_bytes, .. } => s.started = Some(*total_bytes),
            DownloadEvent::Progress { files } => {
                if let Some(done) = files.iter().map(|f: &FileProgress| f.bytes_completed).max() {
                    s.bytes = s.bytes.max(done);
                }
            }
            DownloadEvent::AggregateProgress {
                bytes_completed, ..
            } => s.bytes = s.bytes.max(*bytes_completed),
            DownloadEvent::Complete => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(vars: &[(&str, &str)], home: Option<&str>) -> HubEnv {
        let vars: Vec<(String, OsString)> = vars
            .iter()
            .map(|(k, v)| ((*k).to_string(), OsString::from(v)))
            .collect();
        HubEnv::resolve(
            |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()),
            home.map(Path::new),
        )
        .expect("resolvable")
    }

    #[test]
    fn defaults_follow_the_python_client() {
        let env = env_of(&[], Some("/home/u"));
        assert_eq!(env.endpoint, DEFAULT_ENDPOINT);
        assert_eq!(
            env.cache_dir,
            PathBuf::from("/home/u/.cache/huggingface/hub")
        );
        assert!(!env.offline);
    }

    #[test]
    fn cache_precedence_is_hub_cache_then_hf_home_then_xdg() {
        let xdg = env_of(&[("XDG_CACHE_HOME", "/x")], Some("/h"));
        assert_eq!(xdg.cache_dir, PathBuf::from("/x/huggingface/hub"));
        let home = env_of(&[("XDG_CACHE_HOME", "/x"), ("HF_HOME", "/hf")], None);
        assert_eq!(home.cache_dir, PathBuf::from("/hf/hub"));
        let hub = env_of(&[("HF_HOME", "/hf"), ("HF_HUB_CACHE", "/c")], None);
        assert_eq!(hub.cache_dir, PathBuf::from("/c"));
        let empty = env_of(&[("HF_HUB_CACHE", ""), ("HF_HOME", "/hf")], None);
        assert_eq!(empty.cache_dir, PathBuf::from("/hf/hub"));
    }

    #[test]
    fn no_home_and_no_variables_is_an_error() {
        assert!(HubEnv::resolve(|_| None, None).is_err());
    }

    #[test]
    fn endpoint_loses_its_trailing_slash() {
        let env = env_of(&[("HF_ENDPOINT", "http://127.0.0.1:9/")], Some("/h"));
        assert_eq!(env.endpoint, "http://127.0.0.1:9");
    }

    #[test]
    fn offline_flags() {
        for v in ["1", "true", "YES", "on"] {
            assert!(env_of(&[("HF_HUB_OFFLINE", v)], Some("/h")).offline, "{v}");
        }
        for v in ["0", "false", "", "no"] {
            assert!(!env_of(&[("HF_HUB_OFFLINE", v)], Some("/h")).offline, "{v}");
        }
        assert!(env_of(&[("TRANSFORMERS_OFFLINE", "1")], Some("/h")).offline);
    }

    #[test]
    fn token_precedence_and_redaction() {
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(dir.path().join("token"), "hf_from_file\n").expect("write token");
        let hf_home = dir.path().to_str().expect("utf-8 temp path");

        let env = env_of(&[("HF_HOME", hf_home)], None);
        let token = env.token.expect("token file is read");
        assert_eq!(token.value, "hf_from_file");
        assert!(!format!("{token:?} {token}").contains("hf_from_file"));

        let env = env_of(&[("HF_HOME", hf_home), ("HF_TOKEN", "hf_env")], None);
        let token = env.token.expect("HF_TOKEN wins");
        assert_eq!(token.value, "hf_env");
        assert_eq!(token.source(), "$HF_TOKEN");
        assert!(!format!("{token:?} {token}").contains("hf_env"));

        let env = env_of(
            &[
                ("HF_HOME", hf_home),
                ("HF_TOKEN", "hf_env"),
                ("HF_HUB_DISABLE_IMPLICIT_TOKEN", "1"),
            ],
            None,
        );
        assert!(env.token.is_none());
    }

    #[test]
    fn repo_folder_matches_the_cache_layout() {
        assert_eq!(repo_folder("org/name"), "models--org--name");
    }

    #[test]
    fn cached_file_follows_the_ref_to_the_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let env = env_of(
            &[("HF_HUB_CACHE", dir.path().to_str().expect("utf-8"))],
            None,
        );
        assert!(cached_file(&env, "o/n", "main", "f.gguf").is_none());
        let repo = dir.path().join("models--o--n");
        let commit = "0123456789abcdef0123456789abcdef01234567";
        std::fs::create_dir_all(repo.join("refs")).expect("mkdir");
        std::fs::write(repo.join("refs/main"), commit).expect("write ref");
        assert!(cached_file(&env, "o/n", "main", "f.gguf").is_none());
        let snap = repo.join("snapshots").join(commit);
        std::fs::create_dir_all(&snap).expect("mkdir");
        std::fs::write(snap.join("f.gguf"), b"x").expect("write file");
        assert_eq!(
            cached_file(&env, "o/n", "main", "f.gguf"),
            Some(snap.join("f.gguf"))
        );
        assert_eq!(
            cached_file(&env, "o/n", commit, "f.gguf"),
            Some(snap.join("f.gguf"))
        );
        std::fs::write(repo.join("refs/main"), "../../escape").expect("write ref");
        assert!(cached_file(&env, "o/n", "main", "f.gguf").is_none());
    }

    #[test]
    fn offline_download_makes_no_client() {
        let env = env_of(&[("HF_HUB_OFFLINE", "1")], Some("/h"));
        let err = download(&env, "o/n", "f", Limits::default(), |_| {}).expect_err("offline");
        assert!(matches!(err, FetchError::Offline));
    }
}
