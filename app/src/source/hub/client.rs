//! The Hugging Face Hub's file protocol, as much of it as planning before a
//! download and a resumable download need: the commit a branch is at, a
//! repository's file listing with sizes and LFS hashes, a file's metadata
//! (`HEAD`), byte ranges, and a transfer from an offset.
//!
//! The commit comes from `hf-hub` (its repository info). Everything else is a
//! plain HTTP request here, because `hf-hub` 1.0 does not expose it: its tree
//! entries drop the LFS `oid` (the sha256 the cache names blobs by), its file
//! metadata follows the redirect to the CDN and loses `X-Repo-Commit`, and its
//! downloads restart from zero. The requests are the ones the Python client
//! makes, so any hub (or mirror) that serves it serves us.
//!
//! Every call is bounded: a connect timeout, and a read timeout between two
//! pieces of a body, so an unreachable or stalled hub fails in seconds with a
//! [`FetchError`] that says why in words for the user (and never holds the
//! token).

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use reqwest::StatusCode;
use reqwest::header::{AUTHORIZATION, HeaderMap, HeaderValue, USER_AGENT};

use crate::source::hub::{FetchError, HubEnv};

/// A file of a repository, as the hub lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteFile {
    /// Path inside the repository.
    pub path: String,
    /// Size in bytes (of the real file, not of an LFS pointer).
    pub size: u64,
    /// The LFS sha256, when the file is stored with LFS (model files are).
    pub sha256: Option<String>,
}

/// What a `HEAD` of a file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileMeta {
    /// The commit the revision resolved to (`X-Repo-Commit`).
    pub commit: Option<String>,
    /// The name the cache stores the file under: the LFS sha256
    /// (`X-Linked-Etag`) or the git object id (`ETag`).
    pub etag: String,
    /// Size in bytes (`X-Linked-Size`, else `Content-Length`).
    pub size: Option<u64>,
}

impl FileMeta {
    /// The sha256 of the content, when the etag is one (LFS files).
    #[must_use]
    pub fn sha256(&self) -> Option<&str> {
        is_sha256(&self.etag).then_some(self.etag.as_str())
    }
}

/// Whether `s` is 64 lower- or upper-case hex digits.
#[must_use]
pub fn is_sha256(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Timeouts of hub requests.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// To open a connection.
    pub connect: Duration,
    /// Between two reads of a response (headers or body).
    pub read: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Duration::from_secs(10),
            read: Duration::from_secs(60),
        }
    }
}

/// A connection to the hub: one runtime, one connection pool.
pub struct Hub {
    env: HubEnv,
    rt: tokio::runtime::Runtime,
    http: reqwest::Client,
    no_redirect: reqwest::Client,
    hf: hf_hub::HFClient,
    timeouts: Timeouts,
    received: AtomicU64,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("endpoint", &self.env.endpoint)
            .finish_non_exhaustive()
    }
}

/// An open body: the response and the offset it starts at.
pub struct Body<'a> {
    hub: &'a Hub,
    response: reqwest::Response,
    /// The first byte of the file this body holds.
    pub start: u64,
    /// The file's total size, when the response says.
    pub total: Option<u64>,
}

impl Body<'_> {
    /// The next piece of the body; `None` at its end.
    ///
    /// # Errors
    /// The connection dropped or stalled.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<u8>>, FetchError> {
        let hub = self.hub;
        let chunk = hub
            .rt
            .block_on(self.response.chunk())
            .map_err(|e| hub.transport_error(&e))?;
        if let Some(c) = &chunk {
            hub.received.fetch_add(c.len() as u64, Ordering::Relaxed);
        }
        Ok(chunk.map(|c| c.to_vec()))
    }
}

impl Hub {
    /// Connect (lazily) to the hub `env` names.
    ///
    /// # Errors
    /// [`FetchError::Offline`] when `HF_HUB_OFFLINE` is set; a client that
    /// cannot be built.
    pub fn new(env: &HubEnv, timeouts: Timeouts) -> Result<Self, FetchError> {
        if env.offline {
            return Err(FetchError::Offline);
        }
        let other = |e: &dyn std::fmt::Display| FetchError::Other(format!("HTTP client: {e}"));
        let mut headers = HeaderMap::new();
        let agent = format!("headroom/{}", env!("CARGO_PKG_VERSION"));
        headers.insert(
            USER_AGENT,
            HeaderValue::from_str(&agent).map_err(|e| other(&e))?,
        );
        if let Some(token) = &env.token {
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.secret()))
                .map_err(|_| other(&format!("{token} is not a valid header value")))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let build = |redirects: reqwest::redirect::Policy| {
            reqwest::Client::builder()
                .default_headers(headers.clone())
                .connect_timeout(timeouts.connect)
                .read_timeout(timeouts.read)
                .redirect(redirects)
                .build()
                .map_err(|e| other(&e))
        };
        let http = build(reqwest::redirect::Policy::limited(10))?;
        let no_redirect = build(reqwest::redirect::Policy::none())?;
        let hf = env
            .builder()
            .client(http.clone())
            .build()
            .map_err(|e| other(&e))?;
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| other(&e))?;
        Ok(Self {
            env: env.clone(),
            rt,
            http,
            no_redirect,
            hf,
            timeouts,
            received: AtomicU64::new(0),
        })
    }

    /// The settings this hub was opened with.
    #[must_use]
    pub fn env(&self) -> &HubEnv {
        &self.env
    }

    /// Body bytes received so far by every call.
    #[must_use]
    pub fn bytes_received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// The commit `revision` (a branch, tag or commit) of `repo` is at.
    ///
    /// # Errors
    /// The repository does not exist or may not be read, or the hub is
    /// unreachable.
    pub fn commit(&self, repo: &str, revision: &str) -> Result<String, FetchError> {
        let (owner, name) = split_repo(repo)?;
        let info = self.rt.block_on(
            self.hf
                .model(owner, name)
                .info()
                .revision(revision.to_string())
                .send(),
        );
        let info = info.map_err(|e| crate::source::hub::classify(e, &self.env, repo, ""))?;
        let sha = info
            .sha
            .filter(|s| !s.is_empty())
            .ok_or_else(|| FetchError::Other(format!("the hub gave no commit for {repo}")))?;
        checked_commit(repo, sha)
    }

    /// Every file of `repo` at `commit`, recursively, following the hub's
    /// pagination.
    ///
    /// # Errors
    /// As [`Self::commit`], or a listing that is not the hub's JSON.
    pub fn list(&self, repo: &str, commit: &str) -> Result<Vec<RemoteFile>, FetchError> {
        split_repo(repo)?;
        let mut url = format!(
            "{}/api/models/{repo}/tree/{}?recursive=true",
            self.env.endpoint,
            encode_segment(commit)
        );
        let mut files = Vec::new();
        for _page in 0..1000 {
            let response = self.send(self.http.get(&url), repo, "")?;
            let next = next_link(response.headers());
            let text = self
                .rt
                .block_on(response.text())
                .map_err(|e| self.transport_error(&e))?;
            self.received
                .fetch_add(text.len() as u64, Ordering::Relaxed);
            let page = parse_tree(&text).map_err(|e| {
                FetchError::Other(format!("the file listing of {repo} is not the hub's: {e}"))
            })?;
            // The names become paths in the cache: a hostile listing must not
            // lead outside it (`..`, absolute paths), nor be fetched at all.
            if let Some(bad) = page.iter().find(|f| !is_path_inside_repo(&f.path)) {
                return Err(FetchError::Other(format!(
                    "the file listing of {repo} names {:?}, which is not a file path inside a repository; refusing it",
                    bad.path
                )));
            }
            files.extend(page);
            match next {
                Some(n) => url = n,
                None => return Ok(files),
            }
        }
        Err(FetchError::Other(format!(
            "the file listing of {repo} does not end"
        )))
    }

    /// `HEAD` of a file, without following the redirect to the CDN (the
    /// metadata travels on the redirect itself).
    ///
    /// # Errors
    /// As [`Self::commit`]; a missing file is [`FetchError::NotFound`].
    pub fn head(&self, repo: &str, revision: &str, path: &str) -> Result<FileMeta, FetchError> {
        let url = self.file_url(repo, revision, path)?;
        let response = self.send(self.no_redirect.head(&url), repo, path)?;
        let h = response.headers();
        let text = |name: &str| h.get(name).and_then(|v| v.to_str().ok());
        let etag = text("x-linked-etag")
            .or_else(|| text("etag"))
            .map(|e| e.trim_start_matches("W/").trim_matches('"').to_string())
            .filter(|e| !e.is_empty())
            .ok_or_else(|| FetchError::Other(format!("the hub gave no ETag for {path}")))?;
        let commit = match text("x-repo-commit") {
            Some(c) => Some(checked_commit(repo, c.to_string())?),
            None => None,
        };
        Ok(FileMeta {
            commit,
            etag,
            size: text("x-linked-size")
                .or_else(|| text("content-length"))
                .and_then(|v| v.parse().ok()),
        })
    }

    /// Bytes `start..end` of a file (`end` exclusive; fewer at the end of
    /// the file).
    ///
    /// # Errors
    /// As [`Self::commit`], or a dropped connection.
    pub fn read_range(
        &self,
        repo: &str,
        revision: &str,
        path: &str,
        start: u64,
        end: u64,
    ) -> Result<Vec<u8>, FetchError> {
        if end <= start {
            return Ok(Vec::new());
        }
        let mut body = self.open(repo, revision, path, start, Some(end))?;
        // A server that ignored the range sends the file from byte 0: keep
        // what was asked for and hang up after it, not at the end of the file.
        let skip = usize::try_from(start.saturating_sub(body.start)).unwrap_or(usize::MAX);
        let want = usize::try_from(end - start).unwrap_or(usize::MAX);
        let mut out = Vec::with_capacity(want.min(64 << 20));
        let mut seen = 0usize;
        while out.len() < want {
            let Some(chunk) = body.next_chunk()? else {
                break;
            };
            let from = skip.saturating_sub(seen).min(chunk.len());
            seen += chunk.len();
            let take = (want - out.len()).min(chunk.len() - from);
            out.extend_from_slice(&chunk[from..from + take]);
        }
        Ok(out)
    }

    /// Open a file's body from byte `start` (to `end`, exclusive, or to its
    /// end): `Range: bytes=start-` (or `start-end-1`). A server that ignores
    /// the range answers from byte 0; [`Body::start`] says which.
    ///
    /// # Errors
    /// As [`Self::commit`]; `416` (nothing at `start`) is
    /// [`FetchError::Other`].
    pub fn open(
        &self,
        repo: &str,
        revision: &str,
        path: &str,
        start: u64,
        end: Option<u64>,
    ) -> Result<Body<'_>, FetchError> {
        let url = self.file_url(repo, revision, path)?;
        let mut request = self.http.get(&url);
        let range = match end {
            Some(end) => format!("bytes={start}-{}", end.saturating_sub(1)),
            None => format!("bytes={start}-"),
        };
        if start > 0 || end.is_some() {
            request = request.header(reqwest::header::RANGE, range);
        }
        let response = self.send(request, repo, path)?;
        let h = response.headers();
        let (body_start, total) = if response.status() == StatusCode::PARTIAL_CONTENT {
            let (s, t) = h
                .get(reqwest::header::CONTENT_RANGE)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_content_range)
                .ok_or_else(|| {
                    FetchError::Other(format!(
                        "the hub answered a range of {path} without a valid Content-Range"
                    ))
                })?;
            (s, t)
        } else {
            (0, response.content_length())
        };
        Ok(Body {
            hub: self,
            response,
            start: body_start,
            total,
        })
    }

    fn file_url(&self, repo: &str, revision: &str, path: &str) -> Result<String, FetchError> {
        split_repo(repo)?;
        let path: Vec<String> = path.split('/').map(encode_segment).collect();
        Ok(format!(
            "{}/{repo}/resolve/{}/{}",
            self.env.endpoint,
            encode_segment(revision),
            path.join("/")
        ))
    }

    /// Send a request; a status that is not success becomes the user's
    /// reason.
    fn send(
        &self,
        request: reqwest::RequestBuilder,
        repo: &str,
        path: &str,
    ) -> Result<reqwest::Response, FetchError> {
        // reqwest arms its timers when the future is made: inside the runtime.
        let response = self
            .rt
            .block_on(async move { request.send().await })
            .map_err(|e| self.transport_error(&e))?;
        let status = response.status();
        if status.is_success() || status.is_redirection() {
            return Ok(response);
        }
        let code = response
            .headers()
            .get("x-error-code")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        Err(match status.as_u16() {
            401 => FetchError::AuthRequired {
                repo_id: repo.to_string(),
                token: self.env.token.clone(),
            },
            403 => FetchError::Forbidden {
                repo_id: repo.to_string(),
            },
            404 if code == "RepoNotFound" || path.is_empty() => FetchError::NotFound {
                repo_id: repo.to_string(),
                file: if path.is_empty() {
                    "the repository".into()
                } else {
                    path.to_string()
                },
            },
            404 => FetchError::NotFound {
                repo_id: repo.to_string(),
                file: path.to_string(),
            },
            416 => FetchError::Other(format!("{path}: the requested range is past its end (416)")),
            s => FetchError::Other(format!(
                "{} answered {s} for {}",
                self.env.endpoint,
                if path.is_empty() { repo } else { path }
            )),
        })
    }

    fn transport_error(&self, e: &reqwest::Error) -> FetchError {
        let mut cause: &(dyn std::error::Error + 'static) = e;
        while let Some(next) = cause.source() {
            cause = next;
        }
        if e.is_connect() {
            FetchError::Unreachable {
                endpoint: self.env.endpoint.clone(),
                reason: cause.to_string(),
            }
        } else if e.is_timeout() {
            FetchError::Stalled {
                endpoint: self.env.endpoint.clone(),
                secs: self.timeouts.read.as_secs(),
            }
        } else {
            FetchError::Other(format!(
                "transfer from {} failed: {cause}",
                self.env.endpoint
            ))
        }
    }
}

/// A commit id from the hub, which becomes a folder name in the cache
/// (`snapshots/<commit>`): hexadecimal, as git's are, or refused.
fn checked_commit(repo: &str, sha: String) -> Result<String, FetchError> {
    if (7..=64).contains(&sha.len()) && sha.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(sha)
    } else {
        Err(FetchError::Other(format!(
            "the hub gave {repo} the commit id {sha:?}, which is not one; refusing it"
        )))
    }
}

/// Whether a file name from a listing is a relative path that stays inside
/// the repository: `/`-separated plain parts (no `..`, `.`, or empty part,
/// so no leading `/` either), no backslashes or NULs.
#[must_use]
pub fn is_path_inside_repo(path: &str) -> bool {
    !path.contains(['\\', '\0'])
        && !path
            .split('/')
            .any(|p| p.is_empty() || p == "." || p == "..")
}

fn split_repo(repo: &str) -> Result<(&str, &str), FetchError> {
    repo.split_once('/')
        .filter(|(o, n)| !o.is_empty() && !n.is_empty() && !n.contains('/'))
        .ok_or_else(|| FetchError::Other(format!("{repo:?} is not an org/name repository")))
}

/// Percent-encode one path segment (RFC 3986 unreserved characters stay).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `bytes START-END/TOTAL` → (START, TOTAL).
fn parse_content_range(v: &str) -> Option<(u64, Option<u64>)> {
    let rest = v.trim().strip_prefix("bytes ")?;
    let (range, total) = rest.split_once('/')?;
    let (start, _) = range.split_once('-')?;
    Some((start.trim().parse().ok()?, total.trim().parse().ok()))
}

/// The `rel="next"` target of a `Link` header (the hub's pagination).
fn next_link(headers: &HeaderMap) -> Option<String> {
    let link = headers.get(reqwest::header::LINK)?.to_str().ok()?;
    link.split(',').find_map(|part| {
        let (url, params) = part.split_once(';')?;
        params
            .split(';')
            .any(|p| p.trim().replace(' ', "") == "rel=\"next\"")
            .then(|| {
                url.trim()
                    .trim_start_matches('<')
                    .trim_end_matches('>')
                    .to_string()
            })
    })
}

/// The hub's tree JSON: files with `size` and, for LFS files, `lfs.oid`.
fn parse_tree(text: &str) -> Result<Vec<RemoteFile>, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Lfs {
        oid: Option<String>,
        size: Option<u64>,
    }
    #[derive(serde::Deserialize)]
    struct Entry {
        #[serde(rename = "type")]
        kind: String,
        path: String,
        size: Option<u64>,
        lfs: Option<Lfs>,
    }
    let entries: Vec<Entry> = serde_json::from_str(text)?;
    Ok(entries
        .into_iter()
        .filter(|e| e.kind == "file")
        .map(|e| {
            let lfs_size = e.lfs.as_ref().and_then(|l| l.size);
            RemoteFile {
                path: e.path,
                size: lfs_size.or(e.size).unwrap_or(0),
                sha256: e.lfs.and_then(|l| l.oid).filter(|o| is_sha256(o)),
            }
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tree_entries_keep_the_lfs_hash() {
        let sha = "a".repeat(64);
        let json = format!(
            r#"[{{"type":"directory","oid":"0","path":"d"}},
               {{"type":"file","oid":"1111","size":134,"path":"d/m.gguf",
                 "lfs":{{"oid":"{sha}","size":5000,"pointerSize":134}}}},
               {{"type":"file","oid":"2222","size":12,"path":"README.md"}}]"#
        );
        let files = parse_tree(&json).expect("parses");
        assert_eq!(
            files,
            vec![
                RemoteFile {
                    path: "d/m.gguf".into(),
                    size: 5000,
                    sha256: Some(sha)
                },
                RemoteFile {
                    path: "README.md".into(),
                    size: 12,
                    sha256: None
                }
            ]
        );
    }

    #[test]
    fn content_ranges_and_links() {
        assert_eq!(
            parse_content_range("bytes 10-19/100"),
            Some((10, Some(100)))
        );
        assert_eq!(parse_content_range("bytes 10-19/*"), Some((10, None)));
        assert_eq!(parse_content_range("items 1-2/3"), None);
        let mut h = HeaderMap::new();
        h.insert(
            reqwest::header::LINK,
            HeaderValue::from_static("<https://hub/api/x?cursor=abc>; rel=\"next\""),
        );
        assert_eq!(
            next_link(&h).as_deref(),
            Some("https://hub/api/x?cursor=abc")
        );
        assert_eq!(next_link(&HeaderMap::new()), None);
    }

    #[test]
    fn segments_are_encoded() {
        assert_eq!(encode_segment("a b/c"), "a%20b%2Fc");
        assert_eq!(encode_segment("Q4_K_M-1.gguf"), "Q4_K_M-1.gguf");
    }
}
