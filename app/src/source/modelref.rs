//! Model references as people already type them, and what a repository's
//! file names say about quantizations and split files.
//!
//! `user/repo:Q4_K_M` is llama.cpp's `-hf` form and `hf.co/user/repo:Q4_K_M`
//! ollama's; both are accepted, the quantization case-insensitively, and
//! `:latest` (ollama's default tag) means "let headroom choose". A name without
//! a slash is a catalog id (`qwen2.5-7b-instruct[:Q4_K_M]`).
//!
//! Quantizations are read from file names the way the big GGUF publishers
//! name them: the last `-` or `.` separated token of the stem
//! (`Qwen2.5-7B-Instruct-Q4_K_M.gguf`, `llama-2-7b.Q4_K_M.gguf`,
//! `Model.i1-Q4_K_M.gguf`, `Qwen3-8B-UD-Q4_K_XL.gguf`), after removing
//! llama.cpp's split suffix (`-00001-of-00003`).

use std::fmt;
use std::path::Path;

/// What a MODEL argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelArg {
    /// A path on disk (it exists).
    Path(std::path::PathBuf),
    /// The instruct demo model (`demo`).
    Demo,
    /// The base demo model (`demo-base`).
    DemoBase,
    /// A Hugging Face repository, with an optional quantization or file.
    Hub(HubRef),
    /// A catalog id, with an optional quantization.
    Catalog {
        /// The catalog id.
        id: String,
        /// The quantization asked for (upper case).
        quant: Option<String>,
    },
}

/// A model on the hub: `org/name`, and which of its files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubRef {
    /// `org/name`.
    pub repo: String,
    /// Which file; `None` lets the planner choose.
    pub select: Option<Select>,
}

/// Which file of a repository.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Select {
    /// A quantization label, upper case (`Q4_K_M`).
    Quant(String),
    /// A file name or path in the repository (`x-Q4_K_M.gguf`).
    File(String),
}

impl fmt::Display for HubRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.select {
            None => write!(f, "{}", self.repo),
            Some(Select::Quant(q)) => write!(f, "{}:{q}", self.repo),
            Some(Select::File(file)) => write!(f, "{}:{file}", self.repo),
        }
    }
}

/// A MODEL argument that is none of the accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{arg:?}: {why}")]
pub struct RefError {
    /// What was typed.
    pub arg: String,
    /// What is wrong with it.
    pub why: String,
}

/// What is wrong with an `org/repo[:QUANT|:FILE]` reference.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// Not two parts.
    #[error("a Hugging Face model is org/name (e.g. bartowski/Qwen2.5-7B-Instruct-GGUF)")]
    NotOrgName,
    /// A part the hub would not accept.
    #[error(
        "{0:?} is not a valid repository name part (letters, digits, '-', '_', '.'; no '--' or '..')"
    )]
    RepoPart(String),
    /// A file name that climbs out of the repository.
    #[error("{0:?} is not a file path inside the repository")]
    FilePath(String),
    /// Neither a quantization nor a file name.
    #[error("{0:?} is not a quantization (like Q4_K_M) or a .gguf file name")]
    Selector(String),
}

const HUB_PREFIXES: [&str; 6] = [
    "https://huggingface.co/",
    "http://huggingface.co/",
    "https://hf.co/",
    "http://hf.co/",
    "huggingface.co/",
    "hf.co/",
];

/// Classify a MODEL argument. An existing path always wins (a local
/// directory called `org/name` is the user's); `demo` and `demo-base` are the
/// demo models.
///
/// # Errors
/// A hub reference with a malformed repository or quantization, or a
/// `.gguf` path that does not exist.
pub fn classify(arg: &str) -> Result<ModelArg, RefError> {
    let err = |why: &str| RefError {
        arg: arg.to_string(),
        why: why.to_string(),
    };
    if arg == "demo" {
        return Ok(ModelArg::Demo);
    }
    if arg == "demo-base" {
        return Ok(ModelArg::DemoBase);
    }
    let path = Path::new(arg);
    if path.exists() {
        return Ok(ModelArg::Path(path.to_path_buf()));
    }
    if let Some(rest) = HUB_PREFIXES.iter().find_map(|p| strip_prefix_ci(arg, p)) {
        return parse_hub(rest)
            .map(ModelArg::Hub)
            .map_err(|why| err(&why.to_string()));
    }
    let (name, _) = split_selector(arg);
    if (has_gguf_ext(arg) && !arg.contains(':')) || arg.starts_with(['.', '/', '~']) {
        return Err(err(
            "no such file (give a GGUF path, a directory of them, org/repo[:QUANT], a catalog id, `demo` or `demo-base`)",
        ));
    }
    if name.contains('/') {
        return parse_hub(arg)
            .map(ModelArg::Hub)
            .map_err(|why| err(&why.to_string()));
    }
    let (id, sel) = split_selector(arg);
    if id.is_empty() || !id.chars().all(is_repo_char) {
        return Err(err(
            "not a file, an org/repo reference or a catalog id (letters, digits, '-', '_', '.')",
        ));
    }
    let quant = match sel {
        None => None,
        Some(s) => match parse_select(s).map_err(|why| err(&why.to_string()))? {
            None => None,
            Some(Select::Quant(q)) => Some(q),
            Some(Select::File(_)) => {
                return Err(err("a catalog id takes a quantization, not a file name"));
            }
        },
    };
    Ok(ModelArg::Catalog {
        id: id.to_string(),
        quant,
    })
}

/// Parse `org/name[:QUANT|:FILE.gguf]` (no `hf.co/` prefix).
///
/// # Errors
/// A message saying what is malformed.
pub fn parse_hub(s: &str) -> Result<HubRef, Malformed> {
    let (repo, sel) = split_selector(s);
    let repo = repo.trim_end_matches('/');
    let mut parts = repo.split('/');
    let (Some(org), Some(name), None) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Malformed::NotOrgName);
    };
    for part in [org, name] {
        if !valid_repo_part(part) {
            return Err(Malformed::RepoPart(part.to_string()));
        }
    }
    let select = match sel {
        None => None,
        Some(s) => parse_select(s)?,
    };
    Ok(HubRef {
        repo: format!("{org}/{name}"),
        select,
    })
}

/// The hub reference a catalog id stands for: the repository of its
/// quantizations, with the file of `quant` when one is asked for (without
/// one, the planner chooses among the repository's files, as for
/// `org/repo`).
///
/// # Errors
/// An unknown id or quantization (a [`RefError`], a usage error); a catalog
/// that cannot be read or parsed (an error of the catalog file, exit 1 as
/// for `fit`).
pub fn catalog_ref(id: &str, quant: Option<&str>) -> anyhow::Result<HubRef> {
    let err = |why: String| RefError {
        arg: id.to_string(),
        why,
    };
    let catalog = crate::catalog::load_default()?;
    let Some(entry) = catalog.get(id) else {
        return Err(anyhow::Error::new(err(
            "no such file, and not an org/repo reference or a catalog id (`headroom fit` lists the catalog)"
                .into(),
        )));
    };
    let Some(q) = quant else {
        return Ok(HubRef {
            repo: entry.repo.clone(),
            select: None,
        });
    };
    let Some(found) = entry.quant(q) else {
        let listed: Vec<&str> = entry.quants.iter().map(|q| q.name.as_str()).collect();
        return Err(anyhow::Error::new(err(format!(
            "the catalog lists no {q} for it (it lists {})",
            listed.join(", ")
        ))));
    };
    let select = match found.files.first() {
        Some(file) => Select::File(file.clone()),
        None => Select::Quant(found.name.to_ascii_uppercase()),
    };
    Ok(HubRef {
        repo: found.repo.clone(),
        select: Some(select),
    })
}

/// `name:sel` split at the last colon (`None` without one).
fn split_selector(s: &str) -> (&str, Option<&str>) {
    match s.rsplit_once(':') {
        Some((a, b)) => (a, Some(b)),
        None => (s, None),
    }
}

fn parse_select(s: &str) -> Result<Option<Select>, Malformed> {
    let s = s.trim();
    if s.is_empty() || s.eq_ignore_ascii_case("latest") {
        return Ok(None);
    }
    if has_gguf_ext(s) {
        if s.split('/').any(|p| p.is_empty() || p == "." || p == "..") {
            return Err(Malformed::FilePath(s.to_string()));
        }
        return Ok(Some(Select::File(s.to_string())));
    }
    if s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        Ok(Some(Select::Quant(s.to_ascii_uppercase())))
    } else {
        Err(Malformed::Selector(s.to_string()))
    }
}

fn is_repo_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.')
}

/// The hub's rule for `org` and `name`: letters, digits, `-`, `_`, `.`; not
/// starting or ending with `-` or `.`; no `--` or `..`; at most 96 characters.
fn valid_repo_part(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 96
        && s.chars().all(is_repo_char)
        && !s.starts_with(['-', '.'])
        && !s.ends_with(['-', '.'])
        && !s.contains("--")
        && !s.contains("..")
}

fn strip_prefix_ci<'a>(s: &'a str, prefix: &str) -> Option<&'a str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

fn has_gguf_ext(s: &str) -> bool {
    s.len() > 5 && s[s.len() - 5..].eq_ignore_ascii_case(".gguf")
}

/// One part of a split GGUF (`name-00002-of-00005.gguf`, llama.cpp's
/// `gguf-split` naming).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitPart<'a> {
    /// Everything before `-NNNNN-of-NNNNN.gguf`.
    pub base: &'a str,
    /// 1-based part number.
    pub index: u32,
    /// Number of parts.
    pub count: u32,
}

/// The split part a file name (or path) is, if it is one.
#[must_use]
pub fn split_part(name: &str) -> Option<SplitPart<'_>> {
    if !has_gguf_ext(name) {
        return None;
    }
    let stem = &name[..name.len() - 5];
    // "-00001-of-00003": two five-digit numbers.
    let tail = stem.get(stem.len().checked_sub(15)?..)?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    let (a, b) = tail.strip_prefix('-')?.split_once("-of-")?;
    if !digits(a) || !digits(b) {
        return None;
    }
    let (index, count) = (a.parse().ok()?, b.parse().ok()?);
    (index >= 1 && index <= count).then(|| SplitPart {
        base: &stem[..stem.len() - 15],
        index,
        count,
    })
}

/// The name of part `index` of `count` of the split model `base`.
#[must_use]
pub fn split_name(base: &str, index: u32, count: u32) -> String {
    format!("{base}-{index:05}-of-{count:05}.gguf")
}

/// The quantization label a file name carries (upper case), if any.
#[must_use]
pub fn quant_label(path: &str) -> Option<String> {
    let file = path.rsplit('/').next().unwrap_or(path);
    if !has_gguf_ext(file) {
        return None;
    }
    let stem = match split_part(file) {
        Some(part) => part.base,
        None => &file[..file.len() - 5],
    };
    let token = stem.rsplit(['-', '.']).next()?;
    let upper = token.to_ascii_uppercase();
    let looks_like_quant = ["Q", "IQ", "F", "BF", "TQ", "MXFP"].iter().any(|p| {
        upper
            .strip_prefix(p)
            .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    });
    looks_like_quant.then_some(upper)
}

/// Whether a repository path is a model's GGUF (not a vision projector or
/// an importance matrix).
#[must_use]
pub fn is_model_file(path: &str) -> bool {
    let file = path.rsplit('/').next().unwrap_or(path);
    let lower = file.to_ascii_lowercase();
    has_gguf_ext(file) && !lower.contains("mmproj") && !lower.starts_with("imatrix")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hub(repo: &str, select: Option<Select>) -> ModelArg {
        ModelArg::Hub(HubRef {
            repo: repo.into(),
            select,
        })
    }

    #[test]
    fn the_forms_people_type() {
        let q = |s: &str| Some(Select::Quant(s.into()));
        assert_eq!(classify("demo"), Ok(ModelArg::Demo));
        assert_eq!(classify("org/repo"), Ok(hub("org/repo", None)));
        assert_eq!(
            classify("org/repo:q4_k_m"),
            Ok(hub("org/repo", q("Q4_K_M")))
        );
        assert_eq!(
            classify("hf.co/bartowski/Qwen2.5-7B-Instruct-GGUF:Q8_0"),
            Ok(hub("bartowski/Qwen2.5-7B-Instruct-GGUF", q("Q8_0")))
        );
        assert_eq!(
            classify("https://huggingface.co/org/repo"),
            Ok(hub("org/repo", None))
        );
        assert_eq!(classify("HF.CO/org/repo:latest"), Ok(hub("org/repo", None)));
        assert_eq!(
            classify("org/repo:Model-Q4_K_M.gguf"),
            Ok(hub(
                "org/repo",
                Some(Select::File("Model-Q4_K_M.gguf".into()))
            ))
        );
        assert_eq!(
            classify("qwen2.5-7b-instruct:q4_k_m"),
            Ok(ModelArg::Catalog {
                id: "qwen2.5-7b-instruct".into(),
                quant: Some("Q4_K_M".into())
            })
        );
        assert_eq!(
            classify("llama-3.1-8b"),
            Ok(ModelArg::Catalog {
                id: "llama-3.1-8b".into(),
                quant: None
            })
        );
    }

    #[test]
    fn malformed_references_say_why() {
        for bad in [
            "org/repo/extra",
            "org/re po",
            "-org/repo",
            "org/re--po",
            "org/repo:Q4 K",
            "hf.co/justone",
            "missing.gguf",
            "./nowhere/x",
            "org/repo:../x.gguf",
        ] {
            assert!(classify(bad).is_err(), "{bad} should be refused");
        }
        let err = classify("missing.gguf").expect_err("no such file");
        assert!(err.to_string().contains("no such file"), "{err}");
    }

    #[test]
    fn an_existing_path_wins() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("m.gguf");
        std::fs::write(&p, b"x").expect("write");
        let arg = p.to_str().expect("utf-8");
        assert_eq!(classify(arg), Ok(ModelArg::Path(p.clone())));
    }

    #[test]
    fn quant_labels_of_published_names() {
        for (name, want) in [
            ("Qwen2.5-0.5B-Instruct-Q4_K_M.gguf", Some("Q4_K_M")),
            ("Qwen2.5-0.5B-Instruct-f16.gguf", Some("F16")),
            ("gemma-3-270m-q4_k_m.gguf", Some("Q4_K_M")),
            ("llama-2-7b-chat.Q5_K_S.gguf", Some("Q5_K_S")),
            ("Model.i1-IQ4_XS.gguf", Some("IQ4_XS")),
            ("Qwen3-8B-UD-Q4_K_XL.gguf", Some("Q4_K_XL")),
            ("gpt-oss-20b-MXFP4.gguf", Some("MXFP4")),
            ("Model-BF16.gguf", Some("BF16")),
            (
                "Meta-Llama-3.1-70B-Instruct-Q8_0/Meta-Llama-3.1-70B-Instruct-Q8_0-00001-of-00002.gguf",
                Some("Q8_0"),
            ),
            ("model.gguf", None),
            ("README.md", None),
            ("Model-Instruct.gguf", None),
        ] {
            assert_eq!(quant_label(name).as_deref(), want, "{name}");
        }
    }

    #[test]
    fn split_names_round_trip() {
        let p = split_part("dir/M-Q8_0-00002-of-00003.gguf").expect("a split part");
        assert_eq!(
            p,
            SplitPart {
                base: "dir/M-Q8_0",
                index: 2,
                count: 3
            }
        );
        assert_eq!(split_name(p.base, 2, 3), "dir/M-Q8_0-00002-of-00003.gguf");
        assert!(split_part("M-Q8_0-00004-of-00003.gguf").is_none());
        assert!(split_part("M-Q8_0-0001-of-00003.gguf").is_none());
        assert!(split_part("M-Q8_0.gguf").is_none());
    }

    #[test]
    fn projectors_are_not_models() {
        assert!(is_model_file("x/Model-Q4_K_M.gguf"));
        assert!(!is_model_file("mmproj-Model-f16.gguf"));
        assert!(!is_model_file("Model-Q4_K_M.imatrix"));
    }
}
