//! What of a `response_format` JSON schema llama.cpp's converter enforces.
//!
//! llama.cpp's `json_schema_to_grammar` (common/json-schema.cpp and
//! json-schema-to-grammar.cpp of the version we build) reads a subset of
//! JSON Schema and silently ignores the rest: an unknown keyword
//! (`multipleOf`, `uniqueItems`, `not`, …), a `format` it has no rule for
//! (`email`), bounds on a `number`, a `minLength` beside a `pattern`. For an
//! unsupported `pattern` it only prints a warning on stderr and accepts any
//! string. A client asking for a schema must get it or be told: so every
//! keyword here is either one the converter turns into grammar, an
//! annotation that constrains nothing, or a refusal naming it. The walk
//! follows the converter's own dispatch (`build_node`), so a keyword the
//! converter reads only in some combinations is refused in the others.

use serde_json::Value;

/// Keywords that constrain nothing (documentation, identifiers, defaults).
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$defs",
    "definitions",
];

/// The largest count (`minLength`, `maxItems`, …) accepted: llama.cpp's
/// grammar parser expands `x{m,n}` into about `n` rules, so a count in the
/// millions would be an unbounded allocation.
pub const MAX_COUNT: u64 = 8192;

/// Check `schema` against what the converter enforces. `pattern_ok` says
/// whether a `pattern` is turned into grammar (the converter decides; see
/// `llama::grammar::pattern_is_enforced`).
///
/// # Errors
/// The first keyword that would not be enforced, with its place in the
/// schema (`#/properties/email: format "email" …`).
pub fn check(schema: &Value, pattern_ok: &dyn Fn(&str) -> bool) -> Result<(), String> {
    let mut walk = Walk { pattern_ok };
    walk.node(schema, "#")?;
    for defs in ["$defs", "definitions"] {
        if let Some(Value::Object(d)) = schema.get(defs) {
            for (name, s) in d {
                walk.node(s, &format!("#/{defs}/{name}"))?;
            }
        }
    }
    Ok(())
}

struct Walk<'p> {
    pattern_ok: &'p dyn Fn(&str) -> bool,
}

fn refuse(path: &str, what: impl std::fmt::Display) -> Result<(), String> {
    Err(format!("{path}: {what}"))
}

/// Every keyword of `o` is an annotation or in `used`; else refuse the first.
fn only(o: &serde_json::Map<String, Value>, path: &str, used: &[&str]) -> Result<(), String> {
    match o
        .keys()
        .find(|k| !used.contains(&k.as_str()) && !ANNOTATIONS.contains(&k.as_str()))
    {
        Some(k) => refuse(
            path,
            format!(
                "the keyword {k:?} is not enforced here (this server enforces type, properties, required, additionalProperties, items, prefixItems, minItems, maxItems, enum, const, anyOf, allOf, $ref, pattern, minLength, maxLength, the formats date, time, date-time and uuid, and integer bounds)"
            ),
        ),
        None => Ok(()),
    }
}

fn count(o: &serde_json::Map<String, Value>, path: &str, key: &str) -> Result<(), String> {
    match o.get(key) {
        None => Ok(()),
        Some(v) => match v.as_u64() {
            Some(n) if n <= MAX_COUNT => Ok(()),
            Some(n) => refuse(path, format!("{key} = {n}: at most {MAX_COUNT}")),
            None => refuse(path, format!("{key} must be a non-negative integer")),
        },
    }
}

impl Walk<'_> {
    fn node(&mut self, schema: &Value, path: &str) -> Result<(), String> {
        let Value::Object(o) = schema else {
            return refuse(path, "a schema must be an object");
        };
        if o.contains_key("$ref") {
            return only(o, path, &["$ref"]);
        }
        if o.contains_key("oneOf") {
            return refuse(path, "oneOf (exactly one of) is not enforced: use anyOf");
        }
        if let Some(alts) = o.get("anyOf") {
            only(o, path, &["anyOf"])?;
            return self.list(alts, &format!("{path}/anyOf"));
        }
        if let Some(Value::Array(types)) = o.get("type") {
            for (i, t) in types.iter().enumerate() {
                let mut alt = o.clone();
                alt.insert("type".into(), t.clone());
                self.node(&Value::Object(alt), &format!("{path}/type/{i}"))?;
            }
            return Ok(());
        }
        // A constant or a list of values is stricter than anything beside it.
        if o.contains_key("const") {
            return only(o, path, &["const", "type"]);
        }
        if let Some(e) = o.get("enum") {
            if !e.as_array().is_some_and(|a| !a.is_empty()) {
                return refuse(path, "enum must be a non-empty list");
            }
            return only(o, path, &["enum", "type"]);
        }
        let has_properties = o.contains_key("properties")
            || o.get("additionalProperties")
                .is_some_and(|a| a != &Value::Bool(true));
        let stringish = ["pattern", "minLength", "maxLength", "format"]
            .iter()
            .any(|k| o.contains_key(*k));
        match o.get("type") {
            None if has_properties => self.object(o, path),
            None if o.contains_key("allOf") => self.all_of(o, path),
            None if o.contains_key("items") || o.contains_key("prefixItems") => self.array(o, path),
            None if stringish => self.string(o, path),
            None => only(o, path, &[]),
            Some(Value::String(t)) => match t.as_str() {
                "object" if !has_properties && o.contains_key("allOf") => self.all_of(o, path),
                "object" => self.object(o, path),
                "string" if o.contains_key("allOf") => self.all_of(o, path),
                "string" => self.string(o, path),
                "array" => self.array(o, path),
                "integer" => {
                    only(
                        o,
                        path,
                        &[
                            "type",
                            "minimum",
                            "maximum",
                            "exclusiveMinimum",
                            "exclusiveMaximum",
                        ],
                    )?;
                    for k in ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"] {
                        if o.get(k).is_some_and(|v| !v.is_number()) {
                            return refuse(path, format!("{k} must be a number"));
                        }
                    }
                    if o.contains_key("minimum") && o.contains_key("exclusiveMinimum")
                        || o.contains_key("maximum") && o.contains_key("exclusiveMaximum")
                    {
                        return refuse(
                            path,
                            "both an inclusive and an exclusive bound on one side",
                        );
                    }
                    Ok(())
                }
                "number" => only(o, path, &["type"]).map_err(|e| {
                    if ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"]
                        .iter()
                        .any(|k| o.contains_key(*k))
                    {
                        format!("{path}: bounds on a number are not enforced (only on an integer)")
                    } else {
                        e
                    }
                }),
                "boolean" | "null" => only(o, path, &["type"]),
                other => refuse(path, format!("unknown type {other:?}")),
            },
            Some(_) => refuse(path, "type must be a string or a list of strings"),
        }
    }

    fn list(&mut self, alts: &Value, path: &str) -> Result<(), String> {
        match alts.as_array() {
            Some(a) if !a.is_empty() => {
                for (i, s) in a.iter().enumerate() {
                    self.node(s, &format!("{path}/{i}"))?;
                }
                Ok(())
            }
            _ => refuse(path, "must be a non-empty list of schemas"),
        }
    }

    fn all_of(&mut self, o: &serde_json::Map<String, Value>, path: &str) -> Result<(), String> {
        only(o, path, &["allOf", "type"])?;
        self.list(&o["allOf"], &format!("{path}/allOf"))
    }

    fn object(&mut self, o: &serde_json::Map<String, Value>, path: &str) -> Result<(), String> {
        only(
            o,
            path,
            &["type", "properties", "required", "additionalProperties"],
        )?;
        let props = match o.get("properties") {
            None => None,
            Some(Value::Object(p)) => Some(p),
            Some(_) => return refuse(path, "properties must be an object"),
        };
        if let Some(req) = o.get("required") {
            let Some(names) = req.as_array() else {
                return refuse(path, "required must be a list of names");
            };
            for n in names {
                let known = n
                    .as_str()
                    .is_some_and(|n| props.is_some_and(|p| p.contains_key(n)));
                if !known {
                    return refuse(
                        path,
                        format!("required names {n}, which is not among its properties"),
                    );
                }
            }
        }
        for (name, s) in props.into_iter().flatten() {
            self.node(s, &format!("{path}/properties/{name}"))?;
        }
        match o.get("additionalProperties") {
            None | Some(Value::Bool(_)) => Ok(()),
            Some(s @ Value::Object(_)) => self.node(s, &format!("{path}/additionalProperties")),
            Some(_) => refuse(path, "additionalProperties must be a boolean or a schema"),
        }
    }

    fn array(&mut self, o: &serde_json::Map<String, Value>, path: &str) -> Result<(), String> {
        only(
            o,
            path,
            &["type", "items", "prefixItems", "minItems", "maxItems"],
        )?;
        if o.contains_key("items") && o.contains_key("prefixItems") {
            return refuse(
                path,
                "items beside prefixItems (the converter reads only items)",
            );
        }
        count(o, path, "minItems")?;
        count(o, path, "maxItems")?;
        for key in ["items", "prefixItems"] {
            match o.get(key) {
                None => {}
                Some(Value::Array(_)) => {
                    if o.contains_key("minItems") || o.contains_key("maxItems") {
                        return refuse(
                            path,
                            format!("minItems/maxItems beside a {key} list are not enforced"),
                        );
                    }
                    self.list(&o[key], &format!("{path}/{key}"))?;
                }
                Some(s) => self.node(s, &format!("{path}/{key}"))?,
            }
        }
        Ok(())
    }

    fn string(&mut self, o: &serde_json::Map<String, Value>, path: &str) -> Result<(), String> {
        only(
            o,
            path,
            &["type", "pattern", "format", "minLength", "maxLength"],
        )?;
        count(o, path, "minLength")?;
        count(o, path, "maxLength")?;
        let lengths = o.contains_key("minLength") || o.contains_key("maxLength");
        if let Some(p) = o.get("pattern") {
            let Some(p) = p.as_str() else {
                return refuse(path, "pattern must be a string");
            };
            if lengths || o.contains_key("format") {
                return refuse(
                    path,
                    "minLength, maxLength or format beside a pattern are not enforced (put the length in the pattern)",
                );
            }
            if !(self.pattern_ok)(p) {
                return refuse(
                    path,
                    format!(
                        "pattern {p:?} is not enforced (anchor it with ^ and $, and use plain groups, classes and repetitions)"
                    ),
                );
            }
            return Ok(());
        }
        if let Some(f) = o.get("format") {
            let known = f.as_str().is_some_and(|f| {
                matches!(f, "date" | "time" | "date-time" | "uuid")
                    || (f.len() == 5
                        && f.starts_with("uuid")
                        && (b'1'..=b'5').contains(&f.as_bytes()[4]))
            });
            if !known {
                return refuse(
                    path,
                    format!("format {f} is not enforced (date, time, date-time and uuid are)"),
                );
            }
            if lengths {
                return refuse(
                    path,
                    "minLength or maxLength beside a format are not enforced",
                );
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(v: Value) -> Result<(), String> {
        check(&v, &|p: &str| p.starts_with('^') && p.ends_with('$'))
    }

    #[test]
    fn what_the_converter_enforces_passes() {
        for s in [
            json!({"type": "object"}),
            json!({"type": "object", "title": "City", "properties": {
                "name": {"type": "string", "maxLength": 40, "description": "its name"},
                "population": {"type": "integer", "minimum": 0},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 3},
                "when": {"type": "string", "format": "date"},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "kind": {"enum": ["a", "b"]},
                "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": null},
                "ref": {"$ref": "#/$defs/x"}
            }, "required": ["name", "population"], "additionalProperties": false,
               "$defs": {"x": {"type": ["string", "null"]}}}),
            json!({"type": "array", "prefixItems": [{"type": "number"}, {"type": "boolean"}]}),
            json!({"allOf": [{"type": "object", "properties": {"a": {"type": "null"}}}]}),
        ] {
            assert_eq!(ok(s.clone()), Ok(()), "{s}");
        }
    }

    #[test]
    fn what_it_would_ignore_is_refused_by_name_and_place() {
        for (s, words) in [
            (
                json!({"type": "object", "properties": {"e": {"type": "string", "format": "email"}}}),
                "#/properties/e: format \"email\"",
            ),
            (
                json!({"type": "number", "minimum": 1}),
                "bounds on a number",
            ),
            (
                json!({"type": "integer", "multipleOf": 3}),
                "\"multipleOf\"",
            ),
            (
                json!({"type": "array", "uniqueItems": true}),
                "\"uniqueItems\"",
            ),
            (json!({"oneOf": [{"type": "string"}]}), "oneOf"),
            (json!({"not": {"type": "string"}}), "\"not\""),
            (
                json!({"type": "string", "pattern": "[a-z]+"}),
                "pattern \"[a-z]+\"",
            ),
            (
                json!({"type": "string", "pattern": "^a+$", "maxLength": 3}),
                "beside a pattern",
            ),
            (
                json!({"type": "string", "maxLength": 100_000}),
                "maxLength = 100000",
            ),
            (
                json!({"type": "object", "properties": {}, "required": ["x"]}),
                "not among its properties",
            ),
            (
                json!({"type": "object", "patternProperties": {"a": {}}}),
                "\"patternProperties\"",
            ),
            (
                json!({"$ref": "#/$defs/a", "maxLength": 2}),
                "\"maxLength\"",
            ),
            (json!({"type": "strange"}), "unknown type"),
            (json!("string"), "must be an object"),
            (
                json!({"type": "object", "$defs": {"d": {"type": "string", "format": "uri"}}}),
                "#/$defs/d: format",
            ),
        ] {
            let e = ok(s.clone()).expect_err(&s.to_string());
            assert!(e.contains(words), "{s}: {e}");
        }
    }
}
