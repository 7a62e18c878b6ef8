//! The model catalog (`models.toml`) in the app: which catalog to use, how
//! to plan its entries ([`plan`]) and how to rank them ([`fit`]).
//!
//! Parsing and validation are pure and live in the planner
//! ([`headroom_planner::catalog`], which `fuzz/` exercises without linking
//! llama.cpp); its types are re-exported here. The catalog is compiled into
//! the binary; `--catalog FILE` or `HEADROOM_CATALOG` replaces it.

pub mod fit;
pub mod plan;

use std::path::Path;

pub use headroom_planner::catalog::{
    BUILTIN, BUILTIN_ORIGIN, Catalog, CatalogError, Entry, Quant, USES,
};

/// Environment variable naming a catalog file to use instead.
pub const ENV_CATALOG: &str = "HEADROOM_CATALOG";

/// The catalog named by `HEADROOM_CATALOG`, else the built-in one.
///
/// # Errors
/// An unreadable or invalid catalog file.
pub fn load_default() -> anyhow::Result<Catalog> {
    load(None)
}

/// `path` (`--catalog FILE`) when given, else [`load_default`].
///
/// # Errors
/// An unreadable file, or a [`CatalogError`] naming `file:line`.
pub fn load(path: Option<&Path>) -> anyhow::Result<Catalog> {
    let from_env = std::env::var_os(ENV_CATALOG).filter(|v| !v.is_empty());
    let path = path.map(Path::to_path_buf).or(from_env.map(Into::into));
    match path {
        Some(p) => {
            // The built-in catalog is about 100 KB.
            let text = crate::files::read_text(&p, 16 << 20, "a catalog")
                .map_err(|e| anyhow::anyhow!("cannot read the catalog: {e:#}"))?;
            Ok(Catalog::parse(&text, &p.display().to_string())?)
        }
        None => Ok(Catalog::builtin()?),
    }
}
