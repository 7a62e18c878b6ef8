//! The model catalog (`models.toml`): open-weight models people run
//! locally, their GGUF files on Hugging Face, and the architecture facts the
//! planner needs to plan them before anything is downloaded.
//!
//! This is the catalog as data: parsing and validation, pure functions of
//! the text (so `fuzz/` can run them). The catalog is compiled in
//! ([`BUILTIN`]); the app replaces it with `--catalog FILE` and plans and
//! ranks its entries. Every number in it is listed somewhere (its
//! `sources`): sizes keep the precision their README lists them with, and
//! whatever is derived instead (architecture from a sibling model or from
//! the parameter count, sizes from the architecture) must be reported as
//! estimated.

mod raw;

use std::fmt;

use crate::synth::facts::{FactsError, PartialFacts};
use crate::synth::mix::FileType;

use raw::{RawCatalog, RawModel, RawQuant, parse_listed_size, span_line};

/// The catalog compiled into headroom.
pub const BUILTIN: &str = include_str!("../../../models.toml");
/// What errors call the built-in catalog.
pub const BUILTIN_ORIGIN: &str = "models.toml (built in)";

/// Use tags an entry may carry (`headroom fit --use`).
pub const USES: &[&str] = &[
    "chat",
    "code",
    "small",
    "reasoning",
    "moe",
    "long-context",
    "base",
    "vision",
];

/// A catalog that cannot be used, located at `origin:line`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct CatalogError {
    /// The file (or [`BUILTIN_ORIGIN`]).
    pub origin: String,
    /// 1-based line of the offending entry or value.
    pub line: usize,
    /// What is wrong, on one line.
    pub message: String,
}

impl fmt::Display for CatalogError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.origin, self.line, self.message)
    }
}

/// One downloadable quantization of a model.
#[derive(Debug, Clone, PartialEq)]
pub struct Quant {
    /// The name as the repository lists it (`Q4_K_M`).
    pub name: String,
    /// The llama.cpp mix it is.
    pub file_type: FileType,
    /// Hugging Face repository (`owner/name`).
    pub repo: String,
    /// File name(s) in the repository: one, or the parts of a split file in
    /// order. Empty when the README did not name them: the files are then
    /// found by listing the repository (in `folder` when given).
    pub files: Vec<String>,
    /// Folder holding the parts of a split file whose part names are unknown.
    pub folder: Option<String>,
    /// Size in bytes: exact when `size_precision` is 0, else as listed.
    pub size_bytes: Option<u64>,
    /// ± bytes of the listed precision (`4.92 GB`: 5 MB); 0 for exact bytes.
    pub size_precision: u64,
    /// The size as listed (`4.92 GB`), when it was listed that way.
    pub size_listed: Option<String>,
    /// Set only by `headroom catalog refresh`, after reading the file's header.
    pub verified: bool,
    /// Line of its `[[model.quant]]` table.
    pub line: usize,
}

impl Quant {
    /// Whether `name` names this quantization (case-insensitive; `Q4_K`
    /// and `Q4_K_M` name the same mix).
    #[must_use]
    pub fn matches(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || FileType::from_name(name).is_some_and(|f| f == self.file_type)
    }
}

/// One model.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// Stable identifier (`llama-3.1-8b-instruct`): lower case, digits, `.`, `-`.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Model family.
    pub family: String,
    /// Parameters in billions as stated (or the size label, see
    /// `params_nominal`).
    pub params_b: Option<f64>,
    /// `params_b` is a size label (the name's `8B`, a card's "1B and 3B
    /// sizes"), not a count.
    pub params_nominal: bool,
    /// Active parameters per token in billions (MoE).
    pub params_active_b: Option<f64>,
    /// License identifier.
    pub license: Option<String>,
    /// Use tags (see [`USES`]).
    pub uses: Vec<String>,
    /// Main GGUF repository.
    pub repo: String,
    /// Architecture facts of this model (possibly partial).
    pub arch: PartialFacts,
    /// The entry whose architecture this model shares.
    pub arch_like: Option<String>,
    /// Why it shares it.
    pub arch_like_why: Option<String>,
    /// Where the numbers come from.
    pub sources: Vec<String>,
    /// Remarks.
    pub notes: Vec<String>,
    /// First public release (`YYYY-MM-DD` or `YYYY-MM`), from its card or
    /// release note.
    pub release: Option<String>,
    /// Expected quality of the model at 16 bits, on the LMArena text Elo
    /// scale: the leaderboard's own score where the model is on the pinned
    /// snapshot, else mapped from its card's benchmarks (`quality_basis`
    /// says which). `None`: not known; `fit` ranks it below every model
    /// with a figure.
    pub quality: Option<f64>,
    /// Where `quality` comes from, in one line.
    pub quality_basis: Option<String>,
    /// Ids of the entries this model replaces.
    pub supersedes: Vec<String>,
    /// The sentence of its card or release note that says so.
    pub supersedes_why: Option<String>,
    /// Quantizations, as listed.
    pub quants: Vec<Quant>,
    /// Line of its `[[model]]` table.
    pub line: usize,
}

impl Entry {
    /// The quantization called `name` (see [`Quant::matches`]).
    #[must_use]
    pub fn quant(&self, name: &str) -> Option<&Quant> {
        self.quants
            .iter()
            .find(|q| q.name.eq_ignore_ascii_case(name))
            .or_else(|| self.quants.iter().find(|q| q.matches(name)))
    }

    /// Whether the entry carries use tag `u`.
    #[must_use]
    pub fn has_use(&self, u: &str) -> bool {
        self.uses.iter().any(|x| x.eq_ignore_ascii_case(u))
    }
}

/// The whole catalog.
#[derive(Debug, Clone, PartialEq)]
pub struct Catalog {
    entries: Vec<Entry>,
    origin: String,
}

impl Catalog {
    /// The built-in catalog.
    ///
    /// # Errors
    /// Only if the compiled-in file is invalid (the tests make sure it is not).
    pub fn builtin() -> Result<Catalog, CatalogError> {
        Catalog::parse(BUILTIN, BUILTIN_ORIGIN)
    }

    /// Parse and validate catalog `text`; `origin` names it in errors.
    ///
    /// # Errors
    /// The first problem found, with its line.
    pub fn parse(text: &str, origin: &str) -> Result<Catalog, CatalogError> {
        let err = |line: usize, message: String| CatalogError {
            origin: origin.to_string(),
            line,
            message: one_line(&message),
        };
        let raw: RawCatalog = toml::from_str(text).map_err(|e| {
            let line = e.span().map_or(1, |s| span_line(text, &s));
            err(line, e.message().trim().replace('\n', " "))
        })?;
        let mut entries = Vec::with_capacity(raw.model.len());
        for m in raw.model {
            let line = span_line(text, &m.span());
            let entry = entry(m.into_inner(), line, text).map_err(|(l, msg)| err(l, msg))?;
            if let Some(prev) = entries
                .iter()
                .find(|e: &&Entry| e.id.eq_ignore_ascii_case(&entry.id))
            {
                return Err(err(
                    line,
                    format!("duplicate id '{}' (first at line {})", entry.id, prev.line),
                ));
            }
            entries.push(entry);
        }
        if entries.is_empty() {
            return Err(err(1, "no [[model]] entries".into()));
        }
        let cat = Catalog {
            entries,
            origin: origin.to_string(),
        };
        cat.check_arch_like().map_err(|(l, msg)| err(l, msg))?;
        cat.check_supersedes().map_err(|(l, msg)| err(l, msg))?;
        Ok(cat)
    }

    /// Every entry, in file order.
    #[must_use]
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Where the catalog came from (a path or [`BUILTIN_ORIGIN`]).
    #[must_use]
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// The entry with id `id` (case-insensitive).
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.id.eq_ignore_ascii_case(id))
    }

    /// Mark a quantization verified with the size read from its repository
    /// (for `headroom catalog refresh`). Returns whether it was found.
    pub fn mark_verified(&mut self, id: &str, quant: &str, size_bytes: u64) -> bool {
        let Some(e) = self
            .entries
            .iter_mut()
            .find(|e| e.id.eq_ignore_ascii_case(id))
        else {
            return false;
        };
        let Some(q) = e.quants.iter_mut().find(|q| q.matches(quant)) else {
            return false;
        };
        q.verified = true;
        q.size_bytes = Some(size_bytes);
        q.size_precision = 0;
        true
    }

    /// `supersedes` must name other entries of the catalog, and no entry may
    /// be superseded, through any chain, by itself.
    fn check_supersedes(&self) -> Result<(), (usize, String)> {
        for e in &self.entries {
            for old in &e.supersedes {
                if old.eq_ignore_ascii_case(&e.id) || self.get(old).is_none() {
                    return Err((
                        e.line,
                        format!("{}: supersedes '{old}', which is not another entry", e.id),
                    ));
                }
            }
            // Walk the successors' chain: it must end, and not at `e`.
            let mut seen = vec![e.id.to_ascii_lowercase()];
            let mut frontier: Vec<&str> = e.supersedes.iter().map(String::as_str).collect();
            while let Some(id) = frontier.pop() {
                let id_l = id.to_ascii_lowercase();
                if seen.contains(&id_l) {
                    if id_l == seen[0] {
                        return Err((
                            e.line,
                            format!("{}: supersedes itself through '{id}'", e.id),
                        ));
                    }
                    continue;
                }
                seen.push(id_l);
                if let Some(next) = self.get(id) {
                    frontier.extend(next.supersedes.iter().map(String::as_str));
                }
            }
        }
        Ok(())
    }

    /// `arch_like` must name an entry with complete facts of its own, and the
    /// facts this entry states must agree with it.
    fn check_arch_like(&self) -> Result<(), (usize, String)> {
        for e in &self.entries {
            let Some(like) = &e.arch_like else { continue };
            let Some(target) = self.get(like) else {
                return Err((
                    e.line,
                    format!("{}: arch_like '{like}' is not in the catalog", e.id),
                ));
            };
            if target.arch_like.is_some() || !target.arch.is_complete() {
                return Err((
                    e.line,
                    format!(
                        "{}: arch_like '{like}' must have complete architecture facts of its own",
                        e.id
                    ),
                ));
            }
            let conflicts = e.arch.conflicts(&target.arch);
            if !conflicts.is_empty() {
                return Err((
                    e.line,
                    format!(
                        "{}: facts contradict arch_like '{like}': {}",
                        e.id,
                        conflicts.join(", ")
                    ),
                ));
            }
            // Facts of its own that the other entry lacks can still make an
            // impossible model with the borrowed ones.
            if let Err(why) = e.arch.or(&target.arch).complete() {
                return Err((
                    e.line,
                    format!("{}: with the facts of arch_like '{like}': {why}", e.id),
                ));
            }
        }
        Ok(())
    }
}

/// `message` with control characters escaped: messages quote the file's
/// values (`id 'a\nb'`), and an error is one line.
fn one_line(message: &str) -> String {
    message
        .chars()
        .map(|c| {
            if c.is_control() {
                c.escape_default().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn valid_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'.' || b == b'-')
        && id.bytes().next().is_some_and(|b| b.is_ascii_alphanumeric())
}

fn valid_repo(repo: &str) -> bool {
    let mut parts = repo.split('/');
    let ok = |s: Option<&str>| {
        s.is_some_and(|s| {
            !s.is_empty()
                && s.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b))
        })
    };
    ok(parts.next()) && ok(parts.next()) && parts.next().is_none()
}

/// Validate one model into an [`Entry`]; errors carry their line.
fn entry(m: RawModel, line: usize, text: &str) -> Result<Entry, (usize, String)> {
    let fail = |msg: String| (line, format!("{}: {msg}", m.id));
    if !valid_id(&m.id) {
        return Err((
            line,
            format!(
                "id '{}' must be lower-case letters, digits, '.' and '-'",
                m.id
            ),
        ));
    }
    if m.name.trim().is_empty() || m.family.trim().is_empty() {
        return Err(fail("name and family must not be empty".into()));
    }
    if !valid_repo(&m.repo) {
        return Err(fail(format!("repo '{}' is not owner/name", m.repo)));
    }
    for p in [m.params_b, m.params_active_b].into_iter().flatten() {
        if !(p.is_finite() && p > 0.0) {
            return Err(fail(format!("parameter count {p} must be above 0")));
        }
    }
    if m.uses.is_empty() {
        return Err(fail(
            "use must list at least one of chat, code, small, …".into(),
        ));
    }
    if let Some(u) = m.uses.iter().find(|u| !USES.contains(&u.as_str())) {
        return Err(fail(format!(
            "unknown use '{u}' (known: {})",
            USES.join(", ")
        )));
    }
    if m.arch_like.is_some() != m.arch_like_why.is_some() {
        return Err(fail("arch_like and arch_like_why go together".into()));
    }
    if let Some(r) = m.release.as_deref().filter(|r| !valid_release(r)) {
        return Err(fail(format!("release '{r}' is not YYYY-MM or YYYY-MM-DD")));
    }
    if m.quality.is_some() != m.quality_basis.is_some() {
        return Err(fail("quality and quality_basis go together".into()));
    }
    if let Some(q) = m
        .quality
        .filter(|q| !(q.is_finite() && (500.0..=2500.0).contains(q)))
    {
        return Err(fail(format!(
            "quality {q} is not an Elo-scale figure (500 to 2500)"
        )));
    }
    if m.supersedes.is_empty() == m.supersedes_why.is_some() {
        return Err(fail("supersedes and supersedes_why go together".into()));
    }
    // Missing facts are fine (they are borrowed or estimated); impossible
    // ones (more layers than llama.cpp allows) are refused here, with their
    // line, rather than when the entry is planned.
    if let Err(FactsError::Inconsistent(why)) = m.arch.complete() {
        return Err(fail(format!("arch: {why}")));
    }
    if m.quant.is_empty() {
        return Err(fail("no [[model.quant]]".into()));
    }
    let mut quants: Vec<Quant> = Vec::with_capacity(m.quant.len());
    for q in m.quant {
        let qline = span_line(text, &q.span());
        let q = quant(q.into_inner(), &m.repo, qline)
            .map_err(|msg| (qline, format!("{}: {msg}", m.id)))?;
        if let Some(prev) = quants.iter().find(|p| p.name.eq_ignore_ascii_case(&q.name)) {
            return Err((
                qline,
                format!(
                    "{}: quant {} listed twice (first at line {})",
                    m.id, q.name, prev.line
                ),
            ));
        }
        quants.push(q);
    }
    if m.arch_like.is_none()
        && !m.arch.is_complete()
        && m.params_b.is_none()
        && quants.iter().all(|q| q.size_bytes.is_none())
    {
        return Err(fail(
            "incomplete arch facts need arch_like, params_b or a listed size to estimate from"
                .into(),
        ));
    }
    Ok(Entry {
        id: m.id,
        name: m.name,
        family: m.family,
        params_b: m.params_b,
        params_nominal: m.params_nominal,
        params_active_b: m.params_active_b,
        license: m.license,
        uses: m.uses,
        repo: m.repo,
        arch: m.arch,
        arch_like: m.arch_like,
        arch_like_why: m.arch_like_why,
        sources: m.sources,
        notes: m.notes,
        release: m.release,
        quality: m.quality,
        quality_basis: m.quality_basis,
        supersedes: m.supersedes,
        supersedes_why: m.supersedes_why,
        quants,
        line,
    })
}

/// `YYYY-MM` or `YYYY-MM-DD`, with a month 01-12 and a day 01-31.
fn valid_release(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    let num = |p: &str, len: usize, lo: u32, hi: u32| {
        p.len() == len
            && p.bytes().all(|b| b.is_ascii_digit())
            && p.parse::<u32>().is_ok_and(|n| (lo..=hi).contains(&n))
    };
    match parts.as_slice() {
        [y, m] => num(y, 4, 1990, 2100) && num(m, 2, 1, 12),
        [y, m, d] => num(y, 4, 1990, 2100) && num(m, 2, 1, 12) && num(d, 2, 1, 31),
        _ => false,
    }
}

fn quant(q: RawQuant, model_repo: &str, line: usize) -> Result<Quant, String> {
    let file_type = FileType::from_name(&q.name).ok_or_else(|| {
        format!(
            "quant '{}' is not a llama.cpp file type (Q4_K_M, Q8_0, IQ4_XS, …)",
            q.name
        )
    })?;
    let repo = q.repo.unwrap_or_else(|| model_repo.to_string());
    if !valid_repo(&repo) {
        return Err(format!("quant {}: repo '{repo}' is not owner/name", q.name));
    }
    let given = [q.file.is_some(), q.files.is_some(), q.folder.is_some()];
    if given.iter().filter(|&&g| g).count() > 1 {
        return Err(format!(
            "quant {}: give one of file, files and folder",
            q.name
        ));
    }
    let files: Vec<String> = q
        .file
        .into_iter()
        .chain(q.files.into_iter().flatten())
        .collect();
    if let Some(f) = files
        .iter()
        .find(|f| !f.to_ascii_lowercase().ends_with(".gguf"))
    {
        return Err(format!("quant {}: '{f}' is not a .gguf file name", q.name));
    }
    // The name becomes a path in the cache: it must stay inside the repository.
    if let Some(f) = files.iter().find(|f| {
        f.contains(['\\', '\0']) || f.split('/').any(|p| p.is_empty() || p == "." || p == "..")
    }) {
        return Err(format!(
            "quant {}: '{f}' is not a file path inside the repository (no '..', '.', empty parts or leading '/')",
            q.name
        ));
    }
    let listed = q
        .size
        .as_deref()
        .map(|s| {
            parse_listed_size(s).ok_or_else(|| {
                format!(
                    "quant {}: size '{s}' is not like \"4.92 GB\" (MB, GB or TB of 10^N bytes)",
                    q.name
                )
            })
        })
        .transpose()?;
    if let (Some((b, pm)), Some(exact)) = (listed, q.bytes)
        && exact.abs_diff(b) > pm
    {
        return Err(format!(
            "quant {}: bytes {exact} disagree with the listed size {}",
            q.name,
            q.size.as_deref().unwrap_or_default()
        ));
    }
    if q.bytes == Some(0) || listed.is_some_and(|(b, _)| b == 0) {
        return Err(format!("quant {}: the size must be above 0", q.name));
    }
    let (size_bytes, size_precision) = match (q.bytes, listed) {
        (Some(b), _) => (Some(b), 0),
        (None, Some((b, pm))) => (Some(b), pm),
        (None, None) => (None, 0),
    };
    Ok(Quant {
        name: q.name,
        file_type,
        repo,
        files,
        folder: q.folder,
        size_bytes,
        size_precision,
        size_listed: q.size,
        verified: q.verified,
        line,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
[[model]]
id = "tiny"
name = "Tiny"
family = "Test"
params_b = 0.5
use = ["chat"]
repo = "me/tiny-GGUF"

[[model.quant]]
name = "Q4_K_M"
file = "tiny-Q4_K_M.gguf"
size = "0.40 GB"
"#;

    #[test]
    fn builtin_catalog_parses() {
        let cat = Catalog::builtin().expect("the built-in catalog is valid");
        assert!(cat.entries().len() >= 40);
        let e = cat
            .get("LLAMA-3.1-8B-INSTRUCT")
            .expect("lookup ignores case");
        assert!(e.quant("q4_k_m").is_some());
    }

    #[test]
    fn a_minimal_entry() {
        let cat = Catalog::parse(ONE, "t.toml").expect("valid");
        let q = cat
            .get("tiny")
            .and_then(|e| e.quant("Q4_K"))
            .expect("alias");
        assert_eq!(q.size_bytes, Some(400_000_000));
        assert_eq!(q.size_precision, 5_000_000);
        assert_eq!(q.repo, "me/tiny-GGUF");
        assert!(!q.verified);
    }

    #[test]
    fn release_quality_and_supersedes_are_checked_with_their_line() {
        let with =
            |extra: &str| ONE.replace("use = [\"chat\"]", &format!("use = [\"chat\"]\n{extra}"));
        let ok = with("release = \"2025-07\"\nquality = 1300\nquality_basis = \"board\"");
        let cat = Catalog::parse(&ok, "t.toml").expect("valid");
        let e = cat.get("tiny").expect("entry");
        assert_eq!(e.release.as_deref(), Some("2025-07"));
        assert_eq!(e.quality, Some(1300.0));
        for (extra, what) in [
            ("release = \"2025-13-01\"", "release"),
            ("release = \"July 2025\"", "release"),
            ("quality = 1300", "quality_basis"),
            ("quality = 99999\nquality_basis = \"x\"", "Elo"),
            (
                "supersedes = [\"tiny\"]\nsupersedes_why = \"x\"",
                "not another entry",
            ),
            (
                "supersedes = [\"nope\"]\nsupersedes_why = \"x\"",
                "not another entry",
            ),
            ("supersedes = []\nsupersedes_why = \"x\"", "go together"),
        ] {
            let err = Catalog::parse(&with(extra), "t.toml").expect_err(extra);
            assert!(err.message.contains(what), "{extra}: {err}");
            assert_eq!(err.line, 2, "{extra}: {err}");
        }
        // Two entries that supersede each other.
        let two = format!(
            "{}{}",
            with("supersedes = [\"tiny2\"]\nsupersedes_why = \"x\""),
            with("supersedes = [\"tiny\"]\nsupersedes_why = \"y\"")
                .replace("id = \"tiny\"", "id = \"tiny2\"")
        );
        let err = Catalog::parse(&two, "t.toml").expect_err("a cycle");
        assert!(err.message.contains("supersedes itself"), "{err}");
        let one_way = format!(
            "{}{}",
            ONE,
            with("supersedes = [\"tiny\"]\nsupersedes_why = \"y\"")
                .replace("id = \"tiny\"", "id = \"tiny2\"")
        );
        let cat = Catalog::parse(&one_way, "t.toml").expect("valid");
        let e = cat.get("tiny2").expect("entry");
        assert_eq!(e.supersedes, ["tiny"]);
        assert_eq!(e.supersedes_why.as_deref(), Some("y"));
    }

    #[test]
    fn errors_name_the_line() {
        let bad = ONE.replace("family = \"Test\"", "family = \"Test\"\ncolour = \"red\"");
        let e = Catalog::parse(&bad, "t.toml").expect_err("unknown field");
        assert_eq!(e.line, 6, "{e}");
        assert!(e.to_string().starts_with("t.toml:6: "), "{e}");
        assert!(!e.to_string().contains('\n'));
        let dup = format!("{ONE}\n{ONE}");
        let e = Catalog::parse(&dup, "t.toml").expect_err("duplicate id");
        assert!(e.message.contains("duplicate id"), "{e}");
        assert_eq!(e.line, 16);
        let q = ONE.replace("Q4_K_M\"\nfile", "Q4_K_Q\"\nfile");
        let e = Catalog::parse(&q, "t.toml").expect_err("bad quant");
        assert_eq!(e.line, 10, "{e}");
        let size = ONE.replace("0.40 GB", "0.40GiB");
        assert!(Catalog::parse(&size, "t.toml").is_err());
        let syntax = ONE.replace("name = \"Tiny\"", "name = Tiny");
        let e = Catalog::parse(&syntax, "t.toml").expect_err("syntax");
        assert_eq!(e.line, 4, "{e}");
    }

    /// `ONE` with an `[model.arch]` table holding `arch`.
    fn with_arch(arch: &str) -> String {
        ONE.replace(
            "\n[[model.quant]]",
            &format!("\n[model.arch]\n{arch}\n\n[[model.quant]]"),
        )
    }

    const LLAMA: &str = "architecture = \"llama\"\nblock_count = 2\nembedding_length = 256\n\
        feed_forward_length = 512\nhead_count = 4\nhead_count_kv = 2\nvocab_size = 64";

    #[test]
    fn facts_beyond_any_model_are_refused_with_their_line() {
        assert!(Catalog::parse(&with_arch(LLAMA), "t.toml").is_ok());
        // Found by fuzz/catalog_toml: the parameter count overflowed u64
        // when the entry was laid out.
        let huge = with_arch(&LLAMA.replace("= 512", "= 20455555555555558"));
        let e = Catalog::parse(&huge, "t.toml").expect_err("huge FFN");
        assert_eq!(e.line, 2, "{e}");
        assert_eq!(
            e.message,
            "tiny: arch: the tensors would hold more than 1125899906842624 parameters"
        );
        // Partial facts too: a layout would loop over every layer.
        let layers = with_arch("block_count = 4000000000");
        let e = Catalog::parse(&layers, "t.toml").expect_err("layers");
        assert_eq!(
            e.message,
            "tiny: arch: 4000000000 layers, more than llama.cpp's 512"
        );
    }

    #[test]
    fn arch_like_must_make_a_possible_model() {
        let base = with_arch(LLAMA);
        let other = ONE.replace("\"tiny\"", "\"tiny-2\"").replace(
            "\n[[model.quant]]",
            "arch_like = \"tiny\"\narch_like_why = \"same\"\n\n[model.arch]\n\
                 key_length = 18446744073709551615\n\n[[model.quant]]",
        );
        let e = Catalog::parse(&format!("{base}\n{other}"), "t.toml").expect_err("key size");
        assert!(
            e.message
                .starts_with("tiny-2: with the facts of arch_like 'tiny': inconsistent"),
            "{e}"
        );
    }

    #[test]
    fn a_listed_size_of_zero_is_refused() {
        let zero = ONE.replace("0.40 GB", "0.00 GB");
        let e = Catalog::parse(&zero, "t.toml").expect_err("0 bytes");
        assert_eq!(e.message, "tiny: quant Q4_K_M: the size must be above 0");
        assert_eq!(e.line, 10);
    }

    #[test]
    fn quoted_values_stay_on_one_line() {
        let id = ONE.replace("id = \"tiny\"", "id = \"ti\\nny\"");
        let e = Catalog::parse(&id, "t.toml").expect_err("bad id");
        assert_eq!(
            e.to_string(),
            "t.toml:2: id 'ti\\nny' must be lower-case letters, digits, '.' and '-'"
        );
    }
}
