//! Tool calls in the Hermes syntax (Qwen2.5, Qwen3, Hermes 2/3 and the
//! `hermes` template asset): what the model may write, as a grammar, and
//! what it wrote, as OpenAI's `tool_calls`.
//!
//! llama.cpp's own chat layer (`common_chat_templates_apply`) would do this
//! for every family, but it renders with llama.cpp's Jinja, which has no
//! limit on a template's work: a hostile template in a GGUF could hang or
//! exhaust the server. Templates here are rendered by the one bounded
//! engine (`runner::template`) `run`, `chat` and `serve` share, and this
//! module handles the syntax the rendered template asks for.

use serde_json::{Value, json};

use crate::runner::template::{HERMES_CLOSE, HERMES_OPEN};

use super::openai::Schema;

/// The grammar for Hermes tool calls to `callable` (name, parameters):
/// one `<tool_call>{"name": …, "arguments": …}</tool_call>` block, or with
/// `parallel` one or more, each a call to one of the functions with
/// arguments valid for its schema. The grammar's text is llama.cpp's
/// converter's, from a schema written with `name` before `arguments` (the
/// order the templates show the model).
///
/// # Errors
/// The converter refused the schema.
pub fn hermes_grammar(callable: &[(String, Schema)], parallel: bool) -> Result<String, String> {
    let one = |(name, params): &(String, Schema)| {
        format!(
            r#"{{"type":"object","properties":{{"name":{{"const":{}}},"arguments":{}}},"required":["name","arguments"],"additionalProperties":false}}"#,
            json!(name),
            params.text
        )
    };
    let schema = match callable {
        [only] => one(only),
        many => format!(
            r#"{{"anyOf":[{}]}}"#,
            many.iter().map(one).collect::<Vec<_>>().join(",")
        ),
    };
    let call = crate::llama::grammar::schema_grammar(&schema)?;
    // The converter names its start rule `root`; it becomes one call.
    let call = call
        .lines()
        .map(|l| match l.strip_prefix("root ::=") {
            Some(rest) => format!("tool-call ::={rest}"),
            None => l.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n");
    let block = format!(r#""{HERMES_OPEN}" "\n"? tool-call "\n"? "{HERMES_CLOSE}""#);
    let root = if parallel {
        format!(r#"root ::= {block} ( "\n"? {block} )*"#)
    } else {
        format!("root ::= {block}")
    };
    Ok(format!("{root}\n{call}\n"))
}

/// A call the model wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The function.
    pub name: String,
    /// Its arguments, as JSON text (OpenAI's `function.arguments`).
    pub arguments: String,
}

/// Split an answer into its text and its Hermes tool calls. Text outside
/// the blocks is the content; a block that is not a complete call (the
/// answer was cut short) stays in the content, as written.
#[must_use]
pub fn parse_hermes(text: &str) -> (String, Vec<Call>) {
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(open) = rest.find(HERMES_OPEN) {
        let after = &rest[open + HERMES_OPEN.len()..];
        let Some(close) = after.find(HERMES_CLOSE) else {
            break;
        };
        let call = serde_json::from_str::<Value>(after[..close].trim())
            .ok()
            .and_then(|v| {
                let name = v.get("name")?.as_str()?.to_string();
                let arguments = v.get("arguments").cloned().unwrap_or_else(|| json!({}));
                Some(Call {
                    name,
                    arguments: arguments.to_string(),
                })
            });
        match call {
            Some(c) => {
                content.push_str(&rest[..open]);
                calls.push(c);
            }
            None => {
                content.push_str(&rest[..open + HERMES_OPEN.len() + close + HERMES_CLOSE.len()])
            }
        }
        rest = &after[close + HERMES_CLOSE.len()..];
    }
    content.push_str(rest);
    let content = if calls.is_empty() {
        content
    } else {
        content.trim().to_string()
    };
    (content, calls)
}

/// Streamed text while tools are offered: text passes until a tool call
/// opens (a part of the opening tag at the end is held back); from there
/// on it is kept, to be parsed into calls at the end.
#[derive(Debug, Default)]
pub struct ToolSplit {
    held: String,
    calling: bool,
}

impl ToolSplit {
    /// The text of `piece` that can go out now as content.
    pub fn push(&mut self, piece: &str) -> String {
        self.held.push_str(piece);
        if self.calling {
            return String::new();
        }
        if let Some(i) = self.held.find(HERMES_OPEN) {
            self.calling = true;
            let out = self.held[..i].to_string();
            self.held.drain(..i);
            return out;
        }
        let keep = partial_suffix(&self.held, HERMES_OPEN);
        let cut = self.held.len() - keep;
        let out = self.held[..cut].to_string();
        self.held.drain(..cut);
        out
    }

    /// At the end: the content still held and the calls.
    pub fn finish(&mut self) -> (String, Vec<Call>) {
        let held = std::mem::take(&mut self.held);
        let (content, calls) = parse_hermes(&held);
        (content, calls)
    }
}

/// The length of the longest end of `s` that starts `tag`.
fn partial_suffix(s: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| {
            s.len() >= n && s.is_char_boundary(s.len() - n) && tag.starts_with(&s[s.len() - n..])
        })
        .unwrap_or(0)
}

/// OpenAI's `tool_calls` list: each call with its `id` (`base` and its
/// place), `type` and `function`, and (for stream deltas) its `index`.
#[must_use]
pub fn tool_calls_json(calls: &[Call], base: &str, indexed: bool) -> Value {
    Value::Array(
        calls
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let mut v = json!({
                    "id": format!("{base}-{i}"),
                    "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments},
                });
                if indexed {
                    v["index"] = json!(i);
                }
                v
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_parsed_and_the_rest_is_content() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>\n<tool_call>{\"name\": \"f\", \"arguments\": {}}</tool_call>";
        let (content, calls) = parse_hermes(text);
        assert_eq!(content, "Let me check.");
        assert_eq!(
            calls,
            vec![
                Call {
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into()
                },
                Call {
                    name: "f".into(),
                    arguments: "{}".into()
                },
            ]
        );
        // No call, or a cut-short one: all content, as written.
        assert_eq!(parse_hermes("Paris."), ("Paris.".into(), vec![]));
        let cut = "<tool_call>\n{\"name\": \"get_we";
        assert_eq!(parse_hermes(cut), (cut.into(), vec![]));
        let bad = "<tool_call>not json</tool_call> x";
        assert_eq!(parse_hermes(bad), (bad.into(), vec![]));
    }

    #[test]
    fn streamed_text_stops_at_the_call_even_with_the_tag_split() {
        let mut s = ToolSplit::default();
        let mut out = String::new();
        for piece in [
            "Sure",
            ". <tool",
            "_call>\n{\"name\": \"f\", ",
            "\"arguments\": {}}\n</tool_call>",
        ] {
            out.push_str(&s.push(piece));
        }
        assert_eq!(out, "Sure. ");
        let (content, calls) = s.finish();
        assert_eq!(content, "");
        assert_eq!(
            calls,
            vec![Call {
                name: "f".into(),
                arguments: "{}".into()
            }]
        );
        // A "<" that opens no call is let through.
        let mut s = ToolSplit::default();
        assert_eq!(s.push("1 <"), "1 ");
        assert_eq!(s.push(" 2"), "< 2");
        assert_eq!(s.finish(), (String::new(), vec![]));
    }

    #[test]
    fn ids_and_indexes_take_openai_s_shape() {
        let calls = [Call {
            name: "f".into(),
            arguments: "{}".into(),
        }];
        let v = tool_calls_json(&calls, "call-1", true);
        assert_eq!(
            v,
            json!([{"id": "call-1-0", "type": "function", "index": 0, "function": {"name": "f", "arguments": "{}"}}])
        );
    }
}
