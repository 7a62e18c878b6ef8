//! JSON schemas as llama.cpp grammars, by llama.cpp's own converter
//! (`json_schema_to_grammar` of its common library, through llama-cpp-2,
//! whose wrapper catches the converter's exceptions).

use std::sync::OnceLock;

use serde_json::json;

/// The GBNF grammar llama.cpp's converter makes of `schema` (JSON text:
/// an object's properties keep their order in the grammar).
///
/// # Errors
/// The converter refused the schema (its reason is not passed through
/// llama-cpp-2, so the message is general).
pub fn schema_grammar(schema: &str) -> Result<String, String> {
    llama_cpp_2::json_schema_to_grammar(schema)
        .map_err(|e| format!("llama.cpp's JSON-schema converter refused the schema ({e})"))
}

/// Whether the converter turns the string `pattern` into grammar. For a
/// pattern it cannot translate it warns on stderr and falls back to "any
/// string": that fallback is the grammar of an unanchored pattern, so a
/// pattern whose grammar is that one is not enforced.
#[must_use]
pub fn pattern_is_enforced(pattern: &str) -> bool {
    static ANY_STRING: OnceLock<Option<String>> = OnceLock::new();
    let fallback = ANY_STRING.get_or_init(|| {
        schema_grammar(&json!({"type": "string", "pattern": "x"}).to_string()).ok()
    });
    match (
        schema_grammar(&json!({"type": "string", "pattern": pattern}).to_string()),
        fallback,
    ) {
        (Ok(g), Some(any)) => &g != any,
        _ => false,
    }
}
