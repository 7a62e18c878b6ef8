//! `headroom pull`: plan first, then download exactly the file the plan is
//! for, into the Hugging Face cache, resumably.
//!
//! [`resolve`] finds the repository's commit and files, picks the file (the
//! one asked for, or the planner's choice for the machine, see
//! [`choose`]) and plans it from its header alone (read over HTTP ranges, see
//! [`crate::source::hub::header`]). [`fetch`] then checks the free disk space and
//! downloads each part ([`transfer`]), writing the cache entry itself in the
//! shared layout ([`cache`]).
//!
//! With `HF_HUB_OFFLINE` set, or when the hub cannot be reached, everything
//! is resolved from the caches alone: a pulled file from the Hugging Face
//! cache, or, for planning, a header read before.

use std::fmt;
use std::path::PathBuf;

use anyhow::{Context, Result, bail};
use headroom_planner::plan::Plan;
use headroom_planner::profile::{self, ModelProfile};
use headroom_planner::solve;

use super::cache::RepoCache;
use super::choose::{Candidate, Target};
use crate::source::hub::header::{self, HeaderCache};
use crate::source::hub::{FetchError, HubEnv};
use crate::source::hub::{Hub, RemoteFile, Timeouts};
use crate::source::modelref::HubRef;

/// Where a resolved model's facts came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// The hub answered.
    Hub,
    /// `HF_HUB_OFFLINE` is set: the caches alone.
    Offline,
    /// The hub was unreachable: the caches alone.
    Unreachable,
}

/// A model reference resolved to one file (or split set) and its plan.
pub struct Resolved {
    /// `org/name`.
    pub repo: String,
    /// The commit.
    pub commit: String,
    /// The file (or split set) chosen.
    pub candidate: Candidate,
    /// Every candidate of the repository (as far as known).
    pub all: Vec<Candidate>,
    /// Its profile (from its header).
    pub profile: ModelProfile,
    /// Its exact plan on the target.
    pub plan: Plan,
    /// Why the planner chose it (`None` when the user named it).
    pub why: Option<String>,
    /// The snapshot path of its first part, when it is in the cache.
    pub local: Option<PathBuf>,
    /// Header bytes fetched from the hub to plan.
    pub header_bytes: u64,
    /// Where the facts came from.
    pub origin: Origin,
    hub: Option<Hub>,
}

impl fmt::Debug for Resolved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolved")
            .field("repo", &self.repo)
            .field("commit", &self.commit)
            .field("candidate", &self.candidate)
            .field("local", &self.local)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

impl Resolved {
    /// `org/name:QUANT`, or `org/name:FILE` when the file has no label.
    #[must_use]
    pub fn label(&self) -> String {
        format!("{}:{}", self.repo, self.candidate.label())
    }
}

/// Resolve `model` for `target`: online when allowed and reachable, else
/// from the caches.
///
/// # Errors
/// The hub refuses (401/403 say to set `HF_TOKEN`), the repository has no
/// such file, a header cannot be read, or, offline, nothing is cached.
pub fn resolve(env: &HubEnv, model: &HubRef, target: Target<'_>) -> Result<Resolved> {
    let hub = match Hub::new(env, Timeouts::default()) {
        Ok(h) => h,
        Err(FetchError::Offline) => return resolve_cached(env, model, target, Origin::Offline),
        Err(e) => return Err(e.into()),
    };
    let commit = match hub.commit(&model.repo, "main") {
        Ok(c) => c,
        Err(e @ (FetchError::Unreachable { .. } | FetchError::Stalled { .. })) => {
            return resolve_cached(env, model, target, Origin::Unreachable)
                .map_err(|cached| anyhow::anyhow!("{e}; {cached:#}"));
        }
        Err(e) => return Err(e.into()),
    };
    let files = hub.list(&model.repo, &commit)?;
    let all = super::choose::candidates(&files);
    if all.is_empty() {
        bail!("{} has no GGUF model files", model.repo);
    }
    let headers = HeaderCache::open_default()?;
    headers.set_ref(&model.repo, "main", &commit);
    let mut fetched = 0u64;
    let mut read = |c: &Candidate| -> Result<ModelProfile> {
        let r = header::read_model(&hub, &headers, &model.repo, &commit, &c.files)?;
        fetched += r.fetched;
        to_profile(&r.header, &model.repo, c)
    };
    let (candidate, profile, plan, why) = pick(&model.repo, &all, model, target, &mut read)?;
    let rc = RepoCache::new(env, &model.repo);
    let local = complete_in_cache(&rc, &commit, &candidate);
    Ok(Resolved {
        repo: model.repo.clone(),
        commit,
        candidate,
        all,
        profile,
        plan,
        why,
        local,
        header_bytes: fetched,
        origin: Origin::Hub,
        hub: Some(hub),
    })
}

/// Resolve `model` from the caches alone: a pulled copy in the Hugging Face
/// cache first, else headers read before (enough to plan, not to run).
///
/// # Errors
/// Nothing cached for it (the message says where it looked and why it did
/// not go online).
pub fn resolve_cached(
    env: &HubEnv,
    model: &HubRef,
    target: Target<'_>,
    origin: Origin,
) -> Result<Resolved> {
    let why_offline = match origin {
        Origin::Offline => {
            "; HF_HUB_OFFLINE is set, so it cannot be downloaded (unset it to go online)"
        }
        _ => "",
    };
    let rc = RepoCache::new(env, &model.repo);
    if let Some(commit) = rc.read_ref("main") {
        let files = rc.snapshot_listing(&commit);
        let all = super::choose::candidates(&files);
        if has_match(model, &all) {
            let mut read = |c: &Candidate| -> Result<ModelProfile> {
                let path = rc.snapshot(&commit, c.first());
                let h = crate::source::split::read_local(&path)?;
                to_profile(&h, &model.repo, c)
            };
            let (candidate, profile, plan, why) =
                pick(&model.repo, &all, model, target, &mut read)?;
            let local = Some(rc.snapshot(&commit, candidate.first()));
            return Ok(Resolved {
                repo: model.repo.clone(),
                commit,
                candidate,
                all,
                profile,
                plan,
                why,
                local,
                header_bytes: 0,
                origin,
                hub: None,
            });
        }
    }
    if let Ok(headers) = HeaderCache::open_default()
        && let Some(commit) = headers.get_ref(&model.repo, "main")
    {
        let files: Vec<RemoteFile> = headers
            .files(&model.repo, &commit)
            .into_iter()
            .filter_map(|path| {
                let h = headers.get(&model.repo, &commit, &path)?;
                let size = h.data_offset.checked_add(h.data_size()?)?;
                Some(RemoteFile {
                    path,
                    size,
                    sha256: None,
                })
            })
            .collect();
        let all = super::choose::candidates(&files);
        if has_match(model, &all) {
            let mut read = |c: &Candidate| -> Result<ModelProfile> {
                let paths: Vec<String> = c.files.iter().map(|f| f.path.clone()).collect();
                let h = header::cached_model(&headers, &model.repo, &commit, &paths)
                    .context("a cached header went missing")?;
                to_profile(&h, &model.repo, c)
            };
            let (candidate, profile, plan, why) =
                pick(&model.repo, &all, model, target, &mut read)?;
            return Ok(Resolved {
                repo: model.repo.clone(),
                commit,
                candidate,
                all,
                profile,
                plan,
                why,
                local: None,
                header_bytes: 0,
                origin,
                hub: None,
            });
        }
    }
    bail!(
        "{model} is not in the Hugging Face cache ({}){why_offline}",
        rc.root().display()
    )
}

/// The chosen candidate, its profile, its exact plan, and why.
/// Whether `all` holds the file `model` asks for (any, without a selector).
fn has_match(model: &HubRef, all: &[Candidate]) -> bool {
    match &model.select {
        Some(sel) => super::choose::select(&model.repo, all, sel).is_ok(),
        None => !all.is_empty(),
    }
}

fn pick(
    repo: &str,
    all: &[Candidate],
    model: &HubRef,
    target: Target<'_>,
    read: &mut dyn FnMut(&Candidate) -> Result<ModelProfile>,
) -> Result<(Candidate, ModelProfile, Plan, Option<String>)> {
    let (candidate, why) = match &model.select {
        Some(sel) => (super::choose::select(repo, all, sel)?.clone(), None),
        None => {
            let choice = super::choose::choose(all, target, read)?;
            (all[choice.index].clone(), Some(choice.why))
        }
    };
    // The chosen file's header is cached by now: this read is free.
    let profile = read(&candidate)?;
    let label = format!("{repo}:{}", candidate.label());
    let mut plan = solve::plan(&profile, &label, target.settings, target.hw, target.build);
    use_hf_flag(&mut plan);
    Ok((candidate, profile, plan, why))
}

fn to_profile(
    h: &headroom_planner::gguf::Header,
    repo: &str,
    c: &Candidate,
) -> Result<ModelProfile> {
    if let Some(key) = h.nested_array_key() {
        bail!(
            "{repo}/{}: metadata key '{key}' holds nested arrays, which llama.cpp cannot load",
            c.first()
        );
    }
    profile::profile(h).with_context(|| format!("{repo}/{}: invalid model", c.first()))
}

/// The snapshot path of `c` when every part is complete in the cache.
fn complete_in_cache(rc: &RepoCache, commit: &str, c: &Candidate) -> Option<PathBuf> {
    c.files
        .iter()
        .all(|f| std::fs::metadata(rc.snapshot(commit, &f.path)).is_ok_and(|m| m.len() == f.size))
        .then(|| rc.snapshot(commit, c.first()))
}

/// The downloaded copy of `model` in the Hugging Face cache (no network):
/// the file asked for, or the one quantization downloaded.
///
/// # Errors
/// It is not downloaded (the message says how to get it), or several
/// quantizations are and none was named.
pub fn downloaded(model: &HubRef) -> Result<PathBuf> {
    let env = HubEnv::from_env()?;
    let rc = RepoCache::new(&env, &model.repo);
    let commit = rc.read_ref("main").unwrap_or_default();
    let files = rc.snapshot_listing(&commit);
    let cands = super::choose::candidates(&files);
    let path_of = |c: &Candidate| rc.snapshot(&commit, c.first());
    let not_here = || {
        anyhow::anyhow!(
            "{model} is not downloaded (`headroom pull {model}` downloads it; `headroom plan {model}` plans it from its header alone)"
        )
    };
    match (&model.select, cands.as_slice()) {
        (Some(sel), _) => super::choose::select(&model.repo, &cands, sel)
            .map(path_of)
            .map_err(|_| not_here()),
        (None, []) => Err(not_here()),
        (None, [one]) => Ok(path_of(one)),
        (None, several) => bail!(
            "{model}: several quantizations are downloaded ({}); name one ({}:QUANT)",
            several
                .iter()
                .map(Candidate::label)
                .collect::<Vec<_>>()
                .join(", "),
            model.repo
        ),
    }
}

/// What `plan` needs of a hub model: a label and its profile.
#[derive(Debug)]
pub struct PlanInput {
    /// The local path when the file is downloaded (so the calibration log
    /// matches runs of it), else `org/repo:QUANT`.
    pub label: String,
    /// Its profile.
    pub profile: ModelProfile,
    /// Header bytes fetched from the hub to make it (0 from a cache).
    pub header_bytes: u64,
    /// Total size of the model's files.
    pub size: u64,
}

/// Plan input for `model`: from the caches when they have it (a downloaded
/// file, or a header read before), else from its header over HTTP ranges.
///
/// # Errors
/// As [`resolve`].
pub fn plan_input(model: &HubRef, target: Target<'_>) -> Result<PlanInput> {
    let env = HubEnv::from_env()?;
    // A named file is planned from the caches when they have it (no
    // request at all). Choosing needs the repository's whole listing, so
    // without a quantization the hub is asked (headers still come from the
    // cache), unless it is offline or unreachable.
    let r = if model.select.is_some() || env.offline {
        match resolve_cached(&env, model, target, Origin::Offline) {
            Ok(r) => r,
            Err(_) if !env.offline => resolve(&env, model, target)?,
            Err(e) => return Err(e),
        }
    } else {
        resolve(&env, model, target)?
    };
    let label = r
        .local
        .as_ref()
        .map_or_else(|| r.label(), |p| p.display().to_string());
    Ok(PlanInput {
        label,
        size: r.candidate.size(),
        header_bytes: r.header_bytes,
        profile: r.profile,
    })
}

/// Point a plan's llama.cpp command line at the hub (`-hf org/repo:QUANT`,
/// which llama.cpp downloads itself) instead of a local `-m` path, for a
/// model planned from its header alone.
pub fn use_hf_flag(plan: &mut Plan) {
    let label = plan.model.path.clone();
    if let Some(i) = plan.llama_args.iter().position(|a| a == "-m")
        && plan.llama_args.get(i + 1) == Some(&label)
    {
        plan.llama_args[i] = "-hf".to_string();
    }
}

/// What a download did.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The snapshot path of the file (the first part of a split model).
    pub path: PathBuf,
    /// Total size of the model.
    pub size: u64,
    /// Bytes transferred by this run.
    pub transferred: u64,
    /// Bytes an earlier, interrupted run had left to resume from.
    pub resumed_from: u64,
    /// Nothing had to be downloaded.
    pub cached: bool,
}

/// Download `r`'s file (every part) into the Hugging Face cache.
///
/// # Errors
/// Offline with nothing cached, not enough disk space, or a failed transfer
/// (the partial file stays, and the next run resumes it).
pub fn fetch(env: &HubEnv, r: &Resolved) -> Result<Outcome> {
    let size = r.candidate.size();
    let Some(hub) = &r.hub else {
        return match &r.local {
            Some(path) => Ok(Outcome {
                path: path.clone(),
                size,
                transferred: 0,
                resumed_from: 0,
                cached: true,
            }),
            None => bail!(
                "{} is not in the Hugging Face cache ({}); only its header was read before{}",
                r.label(),
                env.cache_dir.display(),
                if r.origin == Origin::Offline {
                    ", and HF_HUB_OFFLINE is set (unset it to download)"
                } else {
                    ", and the hub cannot be reached"
                }
            ),
        };
    };
    let rc = RepoCache::new(env, &r.repo);
    let mut jobs = Vec::with_capacity(r.candidate.files.len());
    for f in &r.candidate.files {
        let meta = hub.head(&r.repo, &r.commit, &f.path)?;
        if let Some(s) = meta.size
            && s != f.size
        {
            bail!(
                "{}/{}: the listing says {} bytes but the file is {s}",
                r.repo,
                f.path,
                f.size
            );
        }
        let sha256 = f
            .sha256
            .clone()
            .or_else(|| meta.sha256().map(str::to_string));
        jobs.push((f, meta.etag, sha256));
    }
    let need: u64 = jobs
        .iter()
        .map(|(f, etag, _)| {
            let have = if std::fs::metadata(rc.blob(etag)).is_ok_and(|m| m.len() == f.size) {
                f.size
            } else {
                std::fs::metadata(rc.incomplete(etag)).map_or(0, |m| m.len().min(f.size))
            };
            f.size - have
        })
        .sum();
    if need > 0 {
        let free = super::cache::free_bytes(rc.root())?;
        if need > free {
            bail!(
                "not enough disk space: {} needs {} more in {}, but only {} is free",
                r.label(),
                super::progress::size(need),
                env.cache_dir.display(),
                super::progress::size(free)
            );
        }
    }
    let mut out = Outcome {
        path: PathBuf::new(),
        size,
        transferred: 0,
        resumed_from: 0,
        cached: true,
    };
    for (i, (f, etag, sha256)) in jobs.iter().enumerate() {
        let job = super::transfer::Job {
            repo: &r.repo,
            commit: &r.commit,
            path: &f.path,
            size: f.size,
            etag,
            sha256: sha256.as_deref(),
        };
        let partial = std::fs::metadata(rc.incomplete(etag)).map_or(0, |m| m.len());
        let complete = std::fs::metadata(rc.blob(etag)).is_ok_and(|m| m.len() == f.size);
        if !complete {
            let part = if jobs.len() > 1 {
                format!(" (part {} of {})", i + 1, jobs.len())
            } else {
                String::new()
            };
            if partial > 0 && partial < f.size {
                eprintln!(
                    "headroom: resuming {}/{}{part} at {} of {}",
                    r.repo,
                    f.path,
                    super::progress::size(partial),
                    super::progress::size(f.size)
                );
            } else {
                eprintln!(
                    "headroom: downloading {}/{}{part} ({})",
                    r.repo,
                    f.path,
                    super::progress::size(f.size)
                );
            }
        }
        let done = super::transfer::fetch(hub, &rc, &job)?;
        out.transferred += done.transferred;
        out.resumed_from += done.resumed_from;
        out.cached &= done.cached;
        if i == 0 {
            out.path = done.path;
        }
    }
    rc.write_ref("main", &r.commit)?;
    Ok(out)
}
